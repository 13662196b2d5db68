// Command archivebench measures what the ClickHouse archive costs at scale:
// it inserts a generated corpus of crawl.page deliveries through the sink's
// insert path (events.DecodeAccepted, archive.EventRows, archive.Writer.Insert,
// batches of at most 1000 deliveries and 8 MB, as the sink cuts them) into a
// freshly migrated schema, and in the same run the same rows into a copy of
// the tables without text indexes or materialized views and the same
// Documents into a single-column ZSTD table; then it reports bytes on disk
// per page and per column, insert rates at checkpoints, and search latencies
// with and without the text indexes.
//
// It is test tooling (scripts/bench-archive.sh, docs/benchmarks.md "Archive
// at scale"): nothing in the product imports it. Point it only at a
// ClickHouse of its own: it drops and recreates its databases and loads
// gigabytes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlcorpus"
	"github.com/rs/zerolog"
)

type options struct {
	addr       string
	db         string
	pages      int
	sites      int
	crawls     int
	change     float64
	seed       uint64
	runs       int
	optimize   bool
	maxBatch   int
	batchBytes int
	reuse      bool
	copies     bool
	insertOnly bool
	fixed      bool
	searchDoc  string
	api        bool
	price      bool
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", os.Getenv("CLICKHOUSE_ADDR"), "ClickHouse native address of a server of the benchmark's own")
	flag.StringVar(&o.db, "db", "archbench", "database to (re)create; the plain copy is <db>_plain")
	flag.IntVar(&o.pages, "pages", envInt("BENCH_ARCHIVE_PAGES", 20000), "page deliveries to insert (rounded up to whole crawls)")
	flag.IntVar(&o.sites, "sites", envInt("BENCH_ARCHIVE_SITES", 10), "sites")
	flag.IntVar(&o.crawls, "crawls", envInt("BENCH_ARCHIVE_CRAWLS", 5), "crawls of every site")
	flag.Float64Var(&o.change, "change", 0.2, "probability that a page changed since the previous crawl")
	flag.Uint64Var(&o.seed, "seed", uint64(envInt("BENCH_ARCHIVE_SEED", 1)), "corpus seed")
	flag.IntVar(&o.runs, "runs", envInt("BENCH_ARCHIVE_QUERY_RUNS", 7), "timed runs of each query, with and without the indexes")
	flag.BoolVar(&o.optimize, "optimize", os.Getenv("BENCH_ARCHIVE_OPTIMIZE") != "0", "OPTIMIZE ... FINAL every table before measuring bytes and searches")
	flag.IntVar(&o.maxBatch, "batch", 1000, "deliveries per insert at most (SINK_BATCH_SIZE)")
	flag.IntVar(&o.batchBytes, "batch-bytes", 8<<20, "delivery bytes per insert at most (the sink's chunk)")
	flag.BoolVar(&o.copies, "copies", os.Getenv("BENCH_ARCHIVE_COPIES") != "0", "also insert every batch into the copy without indexes and views and into the one-column baseline (false: the archive alone, for a faster 1M fill; bytes then have no baseline)")
	flag.BoolVar(&o.insertOnly, "insert-only", false, "stop after inserting (measure later with -reuse on the same BENCH_ARCHIVE_DATA, on a quieter machine)")
	flag.BoolVar(&o.reuse, "reuse", false, "measure bytes and searches of the databases a previous run left (BENCH_ARCHIVE_DATA), inserting nothing")
	flag.BoolVar(&o.fixed, "fixed", true, "time the fixed query set with and without the text indexes (false: only the documented queries)")
	flag.StringVar(&o.searchDoc, "search-doc", "docs/search.md", "the queries users are told to run, timed on the loaded archive")
	flag.BoolVar(&o.api, "api", os.Getenv("BENCH_ARCHIVE_API") != "0", "time the read API (the reader over HTTP) beside the same queries direct")
	flag.BoolVar(&o.price, "price", os.Getenv("BENCH_ARCHIVE_PRICE") == "1", "price each index, view, materialized column and text codec at insert (server-side copies of the pages)")
	flag.Parse()
	if o.addr == "" {
		fmt.Fprintln(os.Stderr, "archivebench: -addr or CLICKHOUSE_ADDR is required (scripts/bench-archive.sh starts a ClickHouse of its own)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "archivebench:", err)
		os.Exit(1)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func run(ctx context.Context, o options, out io.Writer) error {
	corpus := crawlcorpus.New(o.seed, o.pages, o.sites, o.crawls, o.change)
	plainDB := o.db + "_plain"
	mainCfg := archive.Config{Addr: o.addr, Database: o.db, User: "default"}
	plainCfg := archive.Config{Addr: o.addr, Database: plainDB, User: "default"}

	// The sink's connection, for its inserts.
	conn, err := archive.Open(mainCfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Another for OPTIMIZE and the measurements, which may run longer than
	// the sink's read timeout.
	admin, err := clickhouse.Open(&clickhouse.Options{Addr: mainCfg.Addrs(), Auth: clickhouse.Auth{Username: "default"},
		DialTimeout: 10 * time.Second, ReadTimeout: 2 * time.Hour, MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer admin.Close()

	m, err := machine(ctx, admin)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "machine: %s\n", m)
	fmt.Fprintf(out, "corpus: seed %d, %d sites x %d pages x %d crawls = %d deliveries, %.0f%% of pages changed per recrawl, vocabulary %d words (Zipf s=%.2f)\n",
		o.seed, corpus.Sites, corpus.PagesPerSite, corpus.Crawls, corpus.Len(), 100*o.change, crawlcorpus.VocabSize, crawlcorpus.ZipfS)

	var ins inserted
	if o.reuse {
		// Same seed and page count as the run that loaded them, or the
		// queries' words and ids miss.
		var rows uint64
		if err := admin.QueryRow(ctx, "SELECT sum(rows) FROM system.parts WHERE active AND database = ? AND table = 'pages'", o.db).Scan(&rows); err != nil {
			return err
		}
		ins.pages = int(rows)
		fmt.Fprintf(out, "reusing %s: %d pages\n", o.db, rows)
		// The archive a previous run left, upgraded as a sink would
		// upgrade it when it starts.
		applied, err := schema.Migrate(ctx, conn, mainCfg, zerolog.Nop())
		if err != nil {
			return fmt.Errorf("migrate %s: %w", o.db, err)
		}
		if len(applied) > 0 {
			fmt.Fprintf(out, "migrated %s: %s\n", o.db, strings.Join(applied, ", "))
		}
	} else {
		if err := setup(ctx, admin, conn, mainCfg, plainDB); err != nil {
			return err
		}
		wMain, err := archive.NewWriter(conn, mainCfg)
		if err != nil {
			return err
		}
		wPlain, err := archive.NewWriter(conn, plainCfg)
		if err != nil {
			return err
		}
		if ins, err = insertAll(ctx, o, corpus, conn, admin, wMain, wPlain, plainDB, out); err != nil {
			return err
		}
		if err := completeCrawls(ctx, corpus, wMain); err != nil {
			return err
		}
		if o.insertOnly {
			fmt.Fprintf(out, "\ninserted; measure with -reuse (same -pages and -seed) on the same data directory\n")
			return nil
		}
	}

	if o.optimize && !o.reuse {
		fmt.Fprintln(out, "\noptimize (OPTIMIZE TABLE ... FINAL, one part per table):")
		for _, t := range []string{o.db + ".pages", plainDB + ".pages", plainDB + ".docs_baseline"} {
			start := time.Now()
			if err := admin.Exec(ctx, "OPTIMIZE TABLE "+t+" FINAL"); err != nil {
				return fmt.Errorf("optimize %s: %w", t, err)
			}
			fmt.Fprintf(out, "  %-28s %6.1f s\n", t, time.Since(start).Seconds())
		}
	}
	if err := reportBytes(ctx, admin, o.db, plainDB, ins, out); err != nil {
		return err
	}
	if o.fixed {
		if err := reportSearch(ctx, admin, o, corpus, out); err != nil {
			return err
		}
	}
	if err := reportDocumented(ctx, admin, o, corpus, out); err != nil {
		return err
	}
	if o.api {
		if err := reportAPI(ctx, o, corpus, out); err != nil {
			return fmt.Errorf("read API: %w", err)
		}
	}
	if o.price {
		if err := reportPrice(ctx, admin, conn, o, out); err != nil {
			return err
		}
	}
	disk, _ := diskInfo(ctx, admin)
	fmt.Fprintf(out, "\ndisk: %s; load average at the end: %s\n", disk, loadavg())
	return nil
}

// setup creates the archive with the product's migrations, and beside it a
// copy of the tables the sink writes without text indexes or materialized
// views, and the baseline table.
func setup(ctx context.Context, admin, conn driver.Conn, cfg archive.Config, plainDB string) error {
	for _, db := range []string{cfg.Database, plainDB} {
		if err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" SYNC"); err != nil {
			return fmt.Errorf("drop %s: %w", db, err)
		}
	}
	if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	stmts := []string{"CREATE DATABASE " + plainDB}
	// takedowns: the Writer reads the takedowns in force before each
	// insert; the copy's, empty, filter nothing.
	for _, t := range []string{"pages", "failures", "crawl_events", "takedowns"} {
		stmts = append(stmts, "CREATE TABLE "+plainDB+"."+t+" AS "+cfg.Database+"."+t)
	}
	stmts = append(stmts,
		"CREATE TABLE "+plainDB+".docs_baseline (document String CODEC(ZSTD(3))) ENGINE = MergeTree ORDER BY tuple()")
	for _, s := range stmts {
		if err := admin.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	// Every skip index the migrations gave the copy goes (text and bloom
	// filters alike), whatever later migrations add.
	rows, err := admin.Query(ctx, "SELECT table, name FROM system.data_skipping_indices WHERE database = ?", plainDB)
	if err != nil {
		return err
	}
	var drops []string
	for rows.Next() {
		var table, name string
		if err := rows.Scan(&table, &name); err != nil {
			rows.Close()
			return err
		}
		drops = append(drops, "ALTER TABLE "+plainDB+"."+table+" DROP INDEX "+name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range drops {
		if err := admin.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	// The copy must really lack what it is compared without.
	var idx, views uint64
	if err := admin.QueryRow(ctx, "SELECT count() FROM system.data_skipping_indices WHERE database = ?", plainDB).Scan(&idx); err != nil {
		return err
	}
	if err := admin.QueryRow(ctx, "SELECT count() FROM system.tables WHERE engine = 'MaterializedView' AND has(dependencies_database, ?)", plainDB).Scan(&views); err != nil {
		return err
	}
	if idx != 0 || views != 0 {
		return fmt.Errorf("the plain copy %s has %d skip indexes and %d views feeding from it", plainDB, idx, views)
	}
	return nil
}

type batch struct {
	rows       archive.Rows
	deliveries int
	bodyBytes  int
	decode     time.Duration
}

type inserted struct {
	pages, deliveries    int
	bodyBytes, docBytes  int64
	main, plain, base    time.Duration
	decode, gen, elapsed time.Duration
}

// insertAll generates, decodes and inserts the corpus batch by batch (one
// batch generated ahead while the previous is inserted: memory stays at a
// few batches whatever the page count), timing each table's inserts.
func insertAll(ctx context.Context, o options, c *crawlcorpus.Corpus, conn, admin driver.Conn, wMain, wPlain *archive.Writer, plainDB string, out io.Writer) (inserted, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan batch, 1)
	genErr := make(chan error, 1)
	var genTime time.Duration
	go func() {
		defer close(batches)
		var b batch
		flush := func() bool {
			select {
			case batches <- b:
			case <-ctx.Done():
				return false
			}
			b = batch{}
			return true
		}
		for i := range c.Len() {
			g := time.Now()
			d := c.Delivery(i)
			t := time.Now()
			// What the sink does with each delivery it fetched.
			ev, err := events.DecodeAccepted(d.Body)
			if err != nil {
				genErr <- fmt.Errorf("delivery %d: %w", i, err)
				return
			}
			rows, err := archive.EventRows(ev, d.Body, d.ReceivedAt)
			if err != nil {
				genErr <- fmt.Errorf("delivery %d: %w", i, err)
				return
			}
			b.decode += time.Since(t)
			genTime += t.Sub(g)
			if b.deliveries > 0 && (b.deliveries >= o.maxBatch || b.bodyBytes+len(d.Body) > o.batchBytes) {
				if !flush() {
					return
				}
			}
			b.rows.Add(rows)
			b.deliveries++
			b.bodyBytes += len(d.Body)
		}
		if b.deliveries > 0 {
			flush()
		}
	}()

	fmt.Fprintln(out, "\ninsert: cumulative pages/s of insert time (Writer.Insert: pages, failures), the last interval's in brackets; bytes = active parts now, before any OPTIMIZE")
	fmt.Fprintf(out, "  %9s %16s %16s %7s %14s %10s %10s %10s %6s\n", "pages", "archive", "no idx/views", "ratio", "baseline docs", "archive", "no idx", "baseline", "parts")
	var ins inserted
	var lastPages int
	var lastMain, lastPlain time.Duration
	checkpoint := 10000
	start := time.Now()
	n := 0
	for b := range batches {
		// Alternate which table goes first, so neither always inherits the
		// other's background merges.
		first, second := wMain, wPlain
		dFirst, dSecond := &ins.main, &ins.plain
		if n%2 == 1 && o.copies {
			first, second = wPlain, wMain
			dFirst, dSecond = &ins.plain, &ins.main
		}
		n++
		t := time.Now()
		if err := first.Insert(ctx, b.rows); err != nil {
			return ins, err
		}
		*dFirst += time.Since(t)
		if !o.copies {
			// The archive alone (it went first): the documents' bytes
			// are still counted for the per-page figures.
			for i := range b.rows.Pages {
				ins.docBytes += int64(len(b.rows.Pages[i].Document))
			}
		} else {
			t = time.Now()
			if err := second.Insert(ctx, b.rows); err != nil {
				return ins, err
			}
			*dSecond += time.Since(t)
			t = time.Now()
			docs, err := insertBaseline(ctx, conn, plainDB, b.rows.Pages)
			if err != nil {
				return ins, err
			}
			ins.base += time.Since(t)
			ins.docBytes += docs
		}
		ins.pages += len(b.rows.Pages)
		ins.deliveries += b.deliveries
		ins.bodyBytes += int64(b.bodyBytes)
		ins.decode += b.decode
		if ins.deliveries >= checkpoint || ins.deliveries == c.Len() {
			sizes, parts, err := activeBytes(ctx, admin, o.db+".pages", plainDB+".pages", plainDB+".docs_baseline")
			if err != nil {
				return ins, err
			}
			dp := float64(ins.pages - lastPages)
			fmt.Fprintf(out, "  %9d %7.0f [%6.0f] %7.0f [%6.0f] %6.0f%% %14.0f %10s %10s %10s %6d\n", ins.pages,
				rate(ins.pages, ins.main), dp/(ins.main-lastMain).Seconds(),
				rate(ins.pages, ins.plain), dp/(ins.plain-lastPlain).Seconds(),
				100*ins.plain.Seconds()/ins.main.Seconds(), rate(ins.pages, ins.base),
				mb(sizes[0]), mb(sizes[1]), mb(sizes[2]), parts[0])
			lastPages, lastMain, lastPlain = ins.pages, ins.main, ins.plain
			for checkpoint <= ins.deliveries {
				checkpoint = nextCheckpoint(checkpoint)
			}
			if checkpoint > c.Len() && ins.deliveries < c.Len() {
				checkpoint = c.Len()
			}
		}
	}
	select {
	case err := <-genErr:
		return ins, err
	default:
	}
	ins.gen, ins.elapsed = genTime, time.Since(start)
	fmt.Fprintf(out, "  ratio = insert time without indexes and views / with them (the archive's rate as a share of the copy's)\n")
	fmt.Fprintf(out, "  %d deliveries, %.2f GB of bodies (%.1f kB each), %.2f GB of Documents; wall %.0f s; generating %.0f s, decoding (DecodeAccepted + EventRows) %.0f s = %.2f ms/delivery\n",
		ins.deliveries, float64(ins.bodyBytes)/1e9, float64(ins.bodyBytes)/float64(ins.deliveries)/1e3, float64(ins.docBytes)/1e9,
		ins.elapsed.Seconds(), ins.gen.Seconds(), ins.decode.Seconds(), ins.decode.Seconds()*1e3/float64(ins.deliveries))
	return ins, nil
}

// insertBaseline stores each page's Document once, as received, in the
// single-column table.
func insertBaseline(ctx context.Context, conn driver.Conn, db string, pages []archive.Page) (int64, error) {
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".docs_baseline (document)", driver.WithReleaseConnection())
	if err != nil {
		return 0, fmt.Errorf("insert into docs_baseline: %w", err)
	}
	var n int64
	for i := range pages {
		if err := b.Append(pages[i].Document); err != nil {
			_ = b.Abort()
			return 0, fmt.Errorf("insert into docs_baseline: %w", err)
		}
		n += int64(len(pages[i].Document))
	}
	if err := b.Send(); err != nil {
		return 0, fmt.Errorf("insert into docs_baseline: %w", err)
	}
	return n, nil
}

func activeBytes(ctx context.Context, admin driver.Conn, tables ...string) ([]uint64, []uint64, error) {
	sizes := make([]uint64, len(tables))
	parts := make([]uint64, len(tables))
	for i, t := range tables {
		db, name, _ := strings.Cut(t, ".")
		if err := admin.QueryRow(ctx, "SELECT sum(bytes_on_disk), count() FROM system.parts WHERE active AND database = ? AND table = ?", db, name).Scan(&sizes[i], &parts[i]); err != nil {
			return nil, nil, fmt.Errorf("parts of %s: %w", t, err)
		}
	}
	return sizes, parts, nil
}

func reportBytes(ctx context.Context, admin driver.Conn, db, plainDB string, ins inserted, out io.Writer) error {
	fmt.Fprintln(out, "\nbytes on disk (active parts):")
	fmt.Fprintf(out, "  %-34s %10s %6s %12s %12s %10s %8s\n", "table", "rows", "parts", "on disk", "uncompressed", "per page", "ratio")
	var base uint64
	type tbl struct{ db, name string }
	tables := []tbl{{plainDB, "docs_baseline"}, {db, "pages"}, {plainDB, "pages"}, {db, "failures"}, {db, "crawl_stats"}}
	var archiveTotal uint64
	for _, t := range tables {
		var rows, parts, disk, unc uint64
		if err := admin.QueryRow(ctx, "SELECT sum(rows), count(), sum(bytes_on_disk), sum(data_uncompressed_bytes) FROM system.parts WHERE active AND database = ? AND table = ?",
			t.db, t.name).Scan(&rows, &parts, &disk, &unc); err != nil {
			return fmt.Errorf("parts of %s.%s: %w", t.db, t.name, err)
		}
		if t.name == "docs_baseline" {
			base = disk
		}
		ratio := ""
		if base > 0 {
			ratio = fmt.Sprintf("%.2fx", float64(disk)/float64(base))
		}
		fmt.Fprintf(out, "  %-34s %10d %6d %12s %12s %10s %8s\n", t.db+"."+t.name, rows, parts, mb(disk), mb(unc), kb(float64(disk)/float64(max(ins.pages, 1))), ratio)
	}
	if err := admin.QueryRow(ctx, "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ?", db).Scan(&archiveTotal); err != nil {
		return err
	}
	fmt.Fprintf(out, "  %-34s %10s %6s %12s %12s %10s %8s\n", db+".* (every table of the archive)", "", "", mb(archiveTotal), "", kb(float64(archiveTotal)/float64(max(ins.pages, 1))), ratioOf(archiveTotal, base))
	if ins.deliveries > 0 {
		fmt.Fprintf(out, "  input: %.1f kB of delivery body and %.1f kB of Document JSON per page\n",
			float64(ins.bodyBytes)/float64(max(ins.deliveries, 1))/1e3, float64(ins.docBytes)/float64(max(ins.pages, 1))/1e3)
	}

	fmt.Fprintf(out, "\n%s.pages per column (system.parts_columns) and index (system.data_skipping_indices), per page:\n", db)
	fmt.Fprintf(out, "  %-18s %12s %12s %10s %8s %8s\n", "column", "compressed", "uncompressed", "per page", "ratio", "share")
	var total uint64
	if err := admin.QueryRow(ctx, "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ? AND table = 'pages'", db).Scan(&total); err != nil {
		return err
	}
	rows, err := admin.Query(ctx, `SELECT column, sum(column_data_compressed_bytes) AS c, sum(column_data_uncompressed_bytes) FROM system.parts_columns
		WHERE active AND database = ? AND table = 'pages' GROUP BY column ORDER BY c DESC`, db)
	if err != nil {
		return err
	}
	type line struct {
		name   string
		c, unc uint64
	}
	var lines []line
	for rows.Next() {
		var l line
		if err := rows.Scan(&l.name, &l.c, &l.unc); err != nil {
			rows.Close()
			return err
		}
		lines = append(lines, l)
	}
	rows.Close()
	irows, err := admin.Query(ctx, "SELECT name, data_compressed_bytes, data_uncompressed_bytes FROM system.data_skipping_indices WHERE database = ? AND table = 'pages'", db)
	if err != nil {
		return err
	}
	for irows.Next() {
		var l line
		if err := irows.Scan(&l.name, &l.c, &l.unc); err != nil {
			irows.Close()
			return err
		}
		l.name = "index " + l.name
		lines = append(lines, l)
	}
	irows.Close()
	slices.SortStableFunc(lines, func(a, b line) int { return int(b.c>>10) - int(a.c>>10) })
	for _, l := range lines {
		fmt.Fprintf(out, "  %-18s %12s %12s %10s %7.1fx %7.1f%%\n", l.name, mb(l.c), mb(l.unc), kb(float64(l.c)/float64(max(ins.pages, 1))),
			float64(l.unc)/float64(max(l.c, 1)), 100*float64(l.c)/float64(max(total, 1)))
	}
	return nil
}

type timedQuery struct {
	name, sql string
	args      []any
}

func reportSearch(ctx context.Context, admin driver.Conn, o options, c *crawlcorpus.Corpus, out io.Writer) error {
	p := "SELECT url, title FROM " + o.db + ".pages FINAL WHERE "
	tail := " ORDER BY received_at DESC LIMIT 20"
	qs := []timedQuery{
		{"rare token", p + "hasToken(markdown, {w:String})" + tail, []any{clickhouse.Named("w", c.Word(crawlcorpus.RankRare))}},
		{"common token", p + "hasToken(markdown, {w:String})" + tail, []any{clickhouse.Named("w", c.Word(crawlcorpus.RankCommon))}},
		{"two tokens", p + "hasAllTokens(markdown, {w:String})" + tail, []any{clickhouse.Named("w", c.Word(crawlcorpus.RankPairA)+" "+c.Word(crawlcorpus.RankPairB))}},
		{"phrase", p + "hasAllTokens(markdown, {w:String}) AND markdown ILIKE concat('%', {w:String}, '%')" + tail, []any{clickhouse.Named("w", c.PlantedPhrase())}},
		{"phrase (hasPhrase)", p + "hasPhrase(markdown, {w:String})" + tail, []any{clickhouse.Named("w", c.PlantedPhrase())}},
		{"token in one crawl", p + "crawl_id = {c:UUID} AND hasToken(markdown, {w:String})" + tail,
			[]any{clickhouse.Named("c", c.CrawlID(3, c.Crawls/2)), clickhouse.Named("w", c.Word(crawlcorpus.RankMid))}},
		{"token in one site", p + "startsWith(url, {s:String}) AND hasToken(markdown, {w:String})" + tail,
			[]any{clickhouse.Named("s", c.SitePrefix(5)), clickhouse.Named("w", c.Word(crawlcorpus.RankMid))}},
		{"latest version of a URL", "SELECT crawl_id, received_at, title FROM " + o.db + ".pages FINAL WHERE url = {u:String} ORDER BY received_at DESC LIMIT 1",
			[]any{clickhouse.Named("u", c.PageURL(7, c.PagesPerSite/2))}},
	}
	fmt.Fprintf(out, "\nsearch (%s.pages FINAL, warm cache, %d runs each, alternating with and without the indexes; rows read from the query's progress):\n", o.db, o.runs)
	fmt.Fprintf(out, "  %-24s %9s %9s %9s %9s %7s %11s %11s %11s %s\n", "query", "p50", "p99", "p50 off", "p99 off", "speedup", "hits on/off", "rows read", "rows off", "granules on / off (EXPLAIN indexes = 1)")
	for _, q := range qs {
		var on, off []time.Duration
		var readOn, readOff uint64
		var hits, hitsOff int
		// One warm-up of each.
		for _, idx := range []bool{true, false} {
			if _, _, _, err := timeQuery(ctx, admin, q, idx); err != nil {
				return fmt.Errorf("%s: %w", q.name, err)
			}
		}
		for range o.runs {
			d, read, n, err := timeQuery(ctx, admin, q, true)
			if err != nil {
				return fmt.Errorf("%s: %w", q.name, err)
			}
			on, readOn, hits = append(on, d), read, n
			d, read, nOff, err := timeQuery(ctx, admin, q, false)
			if err != nil {
				return fmt.Errorf("%s: %w", q.name, err)
			}
			// Reported, not refused: a text index whose preprocessor lower-cases
			// may answer differently from the function on the raw column.
			off, readOff, hitsOff = append(off, d), read, nOff
		}
		gOn, err := granules(ctx, admin, q, true)
		if err != nil {
			return err
		}
		gOff, err := granules(ctx, admin, q, false)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %-24s %9s %9s %9s %9s %6.1fx %11s %11d %11d %s / %s\n", q.name, ms(pct(on, 50)), ms(pct(on, 99)), ms(pct(off, 50)), ms(pct(off, 99)),
			pct(off, 50).Seconds()/pct(on, 50).Seconds(), fmt.Sprintf("%d/%d", hits, hitsOff), readOn, readOff, gOn, gOff)
	}
	fmt.Fprintf(out, "  tokens: rare %q (rank %d), common %q (rank %d), two %q %q, phrase %q, one crawl/site: %q (rank %d)\n",
		c.Word(crawlcorpus.RankRare), crawlcorpus.RankRare, c.Word(crawlcorpus.RankCommon), crawlcorpus.RankCommon, c.Word(crawlcorpus.RankPairA), c.Word(crawlcorpus.RankPairB), c.PlantedPhrase(), c.Word(crawlcorpus.RankMid), crawlcorpus.RankMid)
	return nil
}

// timeQuery runs q to its last row and returns its time, the rows it read
// and the rows it answered.
func timeQuery(ctx context.Context, admin driver.Conn, q timedQuery, index bool) (time.Duration, uint64, int, error) {
	var read uint64
	qctx := clickhouse.Context(ctx,
		clickhouse.WithSettings(clickhouse.Settings{"use_skip_indexes": boolInt(index), "use_query_cache": 0}),
		clickhouse.WithProgress(func(p *clickhouse.Progress) { read += p.Rows }))
	start := time.Now()
	rows, err := admin.Query(qctx, q.sql, q.args...)
	if err != nil {
		return 0, 0, 0, err
	}
	n := 0
	for rows.Next() {
		n++
	}
	err = rows.Err()
	rows.Close()
	return time.Since(start), read, n, err
}

// granules summarizes EXPLAIN indexes = 1: the granules the query reads of
// the granules of its parts, and in brackets those the last skip index kept
// (under FINAL, ClickHouse then reads every granule sharing primary key
// values with them: "PrimaryKeyExpand").
func granules(ctx context.Context, admin driver.Conn, q timedQuery, index bool) (string, error) {
	qctx := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"use_skip_indexes": boolInt(index)}))
	rows, err := admin.Query(qctx, "EXPLAIN indexes = 1 "+q.sql, q.args...)
	if err != nil {
		return "", fmt.Errorf("explain %s: %w", q.name, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return summarizeExplain(lines), nil
}

func summarizeExplain(lines []string) string {
	read, total, skip := "?", "?", ""
	section := ""
	for _, line := range lines {
		t := strings.TrimSpace(strings.TrimLeft(line, "│├└─ "))
		switch t {
		case "PrimaryKey", "Skip", "PrimaryKeyExpand", "MinMax", "Partition":
			section = t
			continue
		}
		if _, g, ok := strings.Cut(t, "| Granules: "); ok {
			read = strings.TrimSpace(g)
			continue
		}
		if g, ok := strings.CutPrefix(t, "Granules: "); ok {
			sel, all, _ := strings.Cut(g, "/")
			if total == "?" {
				total = all
			}
			if section == "Skip" {
				skip = sel
			}
		}
	}
	if skip != "" {
		return fmt.Sprintf("%s/%s (index %s)", read, total, skip)
	}
	return read + "/" + total
}

// nextCheckpoint steps 10k, 20k, 50k, 100k, 200k, 500k, 1M...
func nextCheckpoint(c int) int {
	for p := 1; ; p *= 10 {
		switch c {
		case p:
			return 2 * p
		case 2 * p:
			return 5 * p
		case 5 * p:
			return 10 * p
		}
		if p > c {
			return 10 * c
		}
	}
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100 // nearest rank
	return s[min(max(i-1, 0), len(s)-1)]
}

func machine(ctx context.Context, admin driver.Conn) (string, error) {
	var version string
	if err := admin.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return "", fmt.Errorf("ClickHouse at its address does not answer: %w", err)
	}
	disk, err := diskInfo(ctx, admin)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d CPUs (nproc), %s memory, ClickHouse %s, %s, %s, load average %s",
		runtime.NumCPU(), memTotal(), version, runtime.Version(), disk, loadavg()), nil
}

func diskInfo(ctx context.Context, admin driver.Conn) (string, error) {
	var path string
	var free, total uint64
	if err := admin.QueryRow(ctx, "SELECT path, free_space, total_space FROM system.disks WHERE name = 'default'").Scan(&path, &free, &total); err != nil {
		return "", err
	}
	return fmt.Sprintf("data in %s (%.0f of %.0f GB free)", path, float64(free)/1e9, float64(total)/1e9), nil
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			f := strings.Fields(v)
			if n, err := strconv.ParseFloat(f[0], 64); err == nil {
				return fmt.Sprintf("%.1f GiB", n/(1<<20))
			}
		}
	}
	return "?"
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ratioOf prints a/b, or nothing without a baseline (-copies=false).
func ratioOf(a, b uint64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func mb(b uint64) string  { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
func kb(b float64) string { return fmt.Sprintf("%.2f kB", b/1e3) }
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1e3)
}

// completeCrawls archives every crawl's crawl.completed event, so that the
// rounds of a site are complete crawls of one scope and change tracking's
// removals are computed as on a real archive.
func completeCrawls(ctx context.Context, c *crawlcorpus.Corpus, w *archive.Writer) error {
	var rows archive.Rows
	for site := range c.Sites {
		for round := range c.Crawls {
			d := c.EndEvent(site, round)
			ev, err := events.DecodeAccepted(d.Body)
			if err != nil {
				return fmt.Errorf("end of crawl %d/%d: %w", site, round, err)
			}
			r, err := archive.EventRows(ev, d.Body, d.ReceivedAt)
			if err != nil {
				return fmt.Errorf("end of crawl %d/%d: %w", site, round, err)
			}
			rows.Add(r)
		}
	}
	return w.Insert(ctx, rows)
}
