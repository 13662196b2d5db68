package sink_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlcorpus"
	"github.com/crawlhouse/crawlhouse/internal/testkit/proccpu"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// The sink benchmarks (scripts/bench-sink.sh, docs/benchmarks.md) measure
// what the sink costs, from a pre-filled stream into ClickHouse by the sink
// binary: documents/s, the sink process's CPU per page and MB of Documents
// per sink CPU-second, a CPU profile of the sink summed by category, and
// its peak RSS; beside them the ceiling measured in the same run, the same
// rows copied by ClickHouse itself (INSERT ... SELECT) into a freshly
// migrated schema; and the bytes the sink's pages take on disk against the
// same Documents stored once (bytesRatio). Run with -benchtime 1x; the
// document count is BENCH_SINK_DOCS (default 50000) ~5 kB pages and
// BENCH_SINK_MEDIUM (default 5000) ~35 kB pages, both several crawls of
// the same sites (recrawls), and BENCH_SINK_LARGE (default 300) 1 MB
// pages; the sink runs at the product's defaults, SINK_BATCH_SIZE and SINK_BATCH_BYTES from the
// environment when set, or BENCH_SINK_BATCH as its SINK_BATCH_SIZE;
// BENCH_SINK_PROFILE names the profile file (default a new one in the
// temporary directory, printed); BENCH_SINK_BIN runs a sinkprof binary
// built elsewhere (an older commit's, to compare the sink's CPU on the
// same corpus) instead of this tree's; BENCH_SINK_ONLY=1 runs the sink
// alone, without the ceilings and the bytes.

func BenchmarkSinkThroughput(b *testing.B) {
	runBench(b, corpusBodies(smallPages(envInt("BENCH_SINK_DOCS", 50000))))
}

// smallPages is recrawls of n deliveries of markdown alone (a crawl's
// default format), 1-10 KB of it: about 5 kB a delivery.
func smallPages(n int) *crawlcorpus.Corpus {
	c := recrawls(n)
	c.HTML, c.MinMarkdown = false, 1024
	return c
}

// BenchmarkSinkMediumPages is BenchmarkSinkThroughput with pages about
// seven times larger (2-20 KB of markdown and its html, about 35 kB a
// delivery): the sink's memory is bounded by bytes, whatever the page
// size.
func BenchmarkSinkMediumPages(b *testing.B) {
	runBench(b, corpusBodies(recrawls(envInt("BENCH_SINK_MEDIUM", 5000))))
}

// recrawls is the corpus of n deliveries the sink benchmarks insert: 10
// sites crawled 4 times, a fifth of the pages slightly edited between two
// crawls and the rest delivered unchanged, as real recrawls are (the
// bytes the archive keeps depend on it: see bytesRatio).
func recrawls(n int) *crawlcorpus.Corpus {
	c := crawlcorpus.New(1, n, 10, 4, 0.2)
	c.Edits = true
	return c
}

// corpusBodies are the corpus's deliveries, in its order (crawl round by
// round).
func corpusBodies(c *crawlcorpus.Corpus) [][]byte {
	bodies := make([][]byte, c.Len())
	for i := range bodies {
		bodies[i] = c.Delivery(i).Body
	}
	return bodies
}

func BenchmarkSinkLargePages(b *testing.B) {
	n := envInt("BENCH_SINK_LARGE", 300)
	bodies := make([][]byte, n)
	crawl := uuid.NewString()
	for i := range bodies {
		// 1 MB of page: 400 kB markdown, 600 kB html.
		md, html := text(400<<10, uint64(i)), "<p>"+text(600<<10, uint64(i)+1e9)+"</p>"
		bodies[i] = fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"html":%q,"metadata":{"title":"large %d","sourceURL":"https://bench.test/large/%d","statusCode":200}}]}`,
			crawl, uuid.NewString(), md, html, i, i)
	}
	runBench(b, bodies)
}

// sinkShape is the sink's batch settings as it runs in the benchmark: the
// product's defaults, SINK_BATCH_SIZE and SINK_BATCH_BYTES from the
// environment, or BENCH_SINK_BATCH as SINK_BATCH_SIZE.
func sinkShape(b *testing.B) (size, bytes int) {
	cfg, err := sinkcmd.Load(func(k string) string {
		if v := os.Getenv("BENCH_SINK_BATCH"); k == "SINK_BATCH_SIZE" && v != "" {
			return v
		}
		return os.Getenv(k)
	})
	if err != nil {
		b.Fatal(err)
	}
	return cfg.BatchSize, cfg.BatchBytes
}

// rowsPerInsert is how many of bodies (one page each) one insert of the
// sink takes: SINK_BATCH_SIZE, or fewer when SINK_BATCH_BYTES of them
// come first.
func rowsPerInsert(bodies [][]byte, size, bytes int) int {
	var total int
	for _, body := range bodies {
		total += len(body)
	}
	return max(1, min(size, bytes/max(1, total/len(bodies))))
}

func runBench(b *testing.B, bodies [][]byte) {
	size, bytes := sinkShape(b)
	batch := rowsPerInsert(bodies, size, bytes)
	for b.Loop() {
		natsURL := streamtest.Start(b)
		addr, sinkDB := clickhousetest.NewDatabase(b)
		_, srcDB := clickhousetest.NewDatabase(b)
		var total int
		for _, body := range bodies {
			total += len(body)
		}
		prefill(b, natsURL, bodies)
		rows := decodeAll(b, bodies)
		docBytes := documentBytes(rows)
		b.Logf("%d documents, %.1f MB of deliveries (%.1f kB each), %.1f MB of Documents; the sink's inserts take %d pages (SINK_BATCH_SIZE=%d, SINK_BATCH_BYTES=%d)",
			len(bodies), float64(total)/1e6, float64(total)/1e3/float64(len(bodies)), float64(docBytes)/1e6, batch, size, bytes)
		if os.Getenv("BENCH_SINK_ONLY") != "" {
			// The sink's own CPU alone, for comparing builds: no ceiling,
			// no bytes.
			reportSink(b, runSinkProcess(b, natsURL, addr, sinkDB, len(bodies), size), sinkDB, rows)
			continue
		}

		// The ceiling's source: the same rows, in a table of their own.
		src := openArchive(b, addr, srcDB)
		load(b, src, rows, batch)
		// Each phase starts on a server merging nothing, and pays for its
		// own merges only: the source table's are not the sink's, nor the
		// sink's the second copy's.
		server := clickhousetest.Open(b, srcDB)
		settle(b, server)
		ceil1 := serverCopy(b, addr, srcDB, len(rows))
		if stmts := os.Getenv("BENCH_SINK_SCHEMA"); strings.TrimSpace(stmts) != "" {
			// A table setting or a view tried against the same ceiling.
			migrated(b, addr, sinkDB, strings.Split(stmts, ";"))
			b.Logf("the sink's schema changed: %s", stmts)
		}
		settle(b, server)
		s := runSinkProcess(b, natsURL, addr, sinkDB, len(bodies), size)
		// The merges of the sink's parts that were still to come at its
		// last ack: fewer, larger parts must not just defer them.
		threads0 := proccpu.Threads(serverPID())
		settle(b, server)
		s.mergesAfter = proccpu.Spent(threads0, proccpu.Threads(serverPID()))[mergeThreads]
		ceil2 := serverCopy(b, addr, srcDB, len(rows))
		settle(b, server)
		batched := serverCopyBy(b, addr, srcDB, len(rows), batch)
		ceil := (ceil1.rate + ceil2.rate) / 2
		reportSink(b, s, sinkDB, rows)
		b.ReportMetric(ceil, "ceiling_docs/s")
		b.ReportMetric(100*s.rate/ceil, "%_of_ceiling")
		b.Logf("ceiling (ClickHouse's INSERT ... SELECT of the same rows into the same schema) %.0f rows/s (runs %.0f, %.0f%s); sink ÷ ceiling %.2f",
			ceil, ceil1.rate, ceil2.rate, serverCPUNote(len(rows), ceil1, ceil2), s.rate/ceil)
		b.Logf("the same copy in INSERT ... SELECTs of at most %d rows (the sink's inserts), merges running: %.0f rows/s%s; sink ÷ that %.2f",
			batch, batched.rate, serverCPUNote(len(rows), batched), s.rate/batched.rate)
		pages, base := bytesRatio(b, server, sinkDB, srcDB, rows, batch)
		b.ReportMetric(float64(pages)/float64(base), "bytes_÷_docs_once")
		b.Logf("bytes: the sink's pages, search indexes included, %.1f MB on disk (MB and share of the baseline: %s); the same Documents once in one column at ZSTD(3) %.1f MB; ratio %.2f",
			float64(pages)/1e6, largestParts(b, server, sinkDB, base), float64(base)/1e6, float64(pages)/float64(base))
	}
}

// reportSink checks that the sink archived every one of n pages and
// reports its rate, its CPU a page and per MB of Documents (docBytes in
// all), its peak RSS and its profile.
func reportSink(b *testing.B, s sinkRun, db string, rows []archive.Page) {
	n, docBytes := len(rows), documentBytes(rows)
	if got := countRows(b, db, "pages FINAL"); got != uint64(n) {
		b.Fatalf("the sink archived %d pages of %d", got, n)
	}
	mbPerCPUs := float64(docBytes) / 1e6 / s.cpu
	b.ReportMetric(s.rate, "docs/s")
	b.ReportMetric(1e6*s.cpu/float64(n), "sink_cpu_µs/page")
	b.ReportMetric(mbPerCPUs, "doc_MB/sink_cpu_s")
	b.ReportMetric(float64(s.rss)/(1<<20), "peak_rss_MB")
	b.Logf("sink %.0f docs/s, %.1f µs of sink CPU per page, %.1f MB of Documents per sink CPU-second, peak RSS %d MB, %.1f page faults a page%s",
		s.rate, 1e6*s.cpu/float64(n), mbPerCPUs, s.rss>>20, float64(s.faults)/float64(n), sinkServerNote(s, n))
	if late := n - s.late.from; s.late.from > 0 && late > 0 && s.late.cpu > 0 {
		mb := float64(documentBytes(rows[s.late.from:])) / 1e6 / s.late.cpu
		b.ReportMetric(mb, "doc_MB/sink_cpu_s_late")
		b.Logf("the same over the last %d pages (from when %d were acked, the heap at its working size): %.1f µs of sink CPU per page, %.1f MB of Documents per sink CPU-second, %.2f page faults a page",
			late, s.late.from, 1e6*s.late.cpu/float64(late), mb, float64(s.late.faults)/float64(late))
	}
	b.Logf("sink CPU profile %s (go tool pprof -top %s), by category: %s", s.profile, s.profile, profileByCategory(s.profile))
}

// documentBytes is the bytes of the rows' Documents.
func documentBytes(rows []archive.Page) int {
	var n int
	for _, p := range rows {
		n += len(p.Document)
	}
	return n
}

// bytesRatio is what the sink's pages table holds on disk (every column
// and search index, its active parts once merges are done) and what the
// same Documents hold stored once, in one column at ZSTD(3)
// (archivebench's baseline), inserted batch rows at a time into a table of
// srcDB.
func bytesRatio(b *testing.B, server driver.Conn, sinkDB, srcDB string, rows []archive.Page, batch int) (pages, base uint64) {
	ctx := context.Background()
	if err := server.Exec(ctx, "CREATE TABLE "+srcDB+".docs_baseline (document String CODEC(ZSTD(3))) ENGINE = MergeTree ORDER BY tuple()"); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(rows); i += batch {
		ins, err := server.PrepareBatch(ctx, "INSERT INTO "+srcDB+".docs_baseline (document)")
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range rows[i:min(i+batch, len(rows))] {
			if err := ins.Append(p.Document); err != nil {
				b.Fatal(err)
			}
		}
		if err := ins.Send(); err != nil {
			b.Fatal(err)
		}
	}
	settle(b, server)
	return onDisk(b, server, sinkDB, "pages"), onDisk(b, server, srcDB, "docs_baseline")
}

// onDisk is the bytes db.table's active parts take on disk.
func onDisk(b *testing.B, conn driver.Conn, db, table string) uint64 {
	return clickhousetest.Count(b, conn, "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ? AND table = ?", db, table)
}

// largestParts names the columns and search indexes of db.pages that take
// the most bytes on disk, largest first, with their MB and their share of
// base (the bytes of the Documents stored once).
func largestParts(b *testing.B, server driver.Conn, db string, base uint64) string {
	rows, err := server.Query(context.Background(), `SELECT name, bytes FROM (
		SELECT column AS name, sum(column_bytes_on_disk) AS bytes FROM system.parts_columns WHERE active AND database = ? AND table = 'pages' GROUP BY column
		UNION ALL
		SELECT 'index ' || name, data_compressed_bytes FROM system.data_skipping_indices WHERE database = ? AND table = 'pages')
		ORDER BY bytes DESC LIMIT 6`, db, db)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var each []string
	for rows.Next() {
		var name string
		var bytes uint64
		if err := rows.Scan(&name, &bytes); err != nil {
			b.Fatal(err)
		}
		each = append(each, fmt.Sprintf("%s %.1f (%.3f)", name, float64(bytes)/1e6, float64(bytes)/float64(base)))
	}
	return strings.Join(each, ", ")
}

// prefill publishes the deliveries as the receiver does, 8 at a time.
func prefill(b *testing.B, natsURL string, bodies [][]byte) {
	cfg := stream.Config{URL: natsURL, Stream: "CRAWL_EVENTS", SubjectPrefix: "crawl.events", DedupWindow: 30 * time.Minute, MaxAge: time.Hour, Replicas: 1}
	nc, js, err := stream.Connect(cfg, "bench-prefill", zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	if _, err := stream.EnsureStream(ctx, js, cfg); err != nil {
		b.Fatal(err)
	}
	pub := stream.NewPublisher(nc, js, cfg, stream.PublisherOptions{})
	defer pub.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(bodies); i += 8 {
				h, err := events.Validate(bodies[i])
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := pub.Publish(ctx, delivery.NewEnvelope(cfg.SubjectPrefix, h, bodies[i], time.Now())); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func decodeAll(b *testing.B, bodies [][]byte) []archive.Page {
	var out []archive.Page
	for _, body := range bodies {
		ev, err := events.DecodeAccepted(body)
		if err != nil {
			b.Fatal(err)
		}
		r, err := archive.EventRows(ev, body, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, r.Pages...)
	}
	return out
}

// archiveConn opens a connection to db on addr, closed when b ends.
func archiveConn(b *testing.B, addr, db string) (driver.Conn, archive.Config) {
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn, cfg
}

// migrated migrates db on addr and then applies stmts to it, {db} standing
// for its name (a schema changed for a run: change tracking taken out, a
// setting tried; an empty statement is skipped); the connection is b's.
func migrated(b *testing.B, addr, db string, stmts []string) (driver.Conn, archive.Config) {
	conn, cfg := archiveConn(b, addr, db)
	ctx := context.Background()
	if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		b.Fatal(err)
	}
	for _, q := range stmts {
		if q = strings.TrimSpace(strings.ReplaceAll(q, "{db}", db)); q == "" {
			continue
		}
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	return conn, cfg
}

// openArchive opens db on addr with its schema migrated.
func openArchive(b *testing.B, addr, db string) *archive.Store {
	conn, cfg := migrated(b, addr, db, nil)
	s, err := archive.NewStore(conn, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// load inserts rows in batches with the sink's own Writer.
func load(b *testing.B, s *archive.Store, rows []archive.Page, batch int) {
	for i := 0; i < len(rows); i += batch {
		if err := s.Insert(context.Background(), archive.Rows{Pages: rows[i:min(i+batch, len(rows))]}); err != nil {
			b.Fatal(err)
		}
	}
}

// settle waits until the server of conn runs no merge, seen in three polls
// in a row 200 ms apart (for at most three minutes: a server that never
// settles is noted and measured as it is).
func settle(b *testing.B, conn driver.Conn) {
	quiet := 0
	for deadline := time.Now().Add(3 * time.Minute); quiet < 3; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Logf("ClickHouse still merging after 3 minutes; measuring anyway")
			return
		}
		if clickhousetest.Count(b, conn, "SELECT count() FROM system.merges") == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
}

func countRows(b *testing.B, db, from string) uint64 {
	conn := clickhousetest.Open(b, db)
	return clickhousetest.Count(b, conn, "SELECT count() FROM "+db+"."+from)
}

// copied is one server-side copy of the pages: rows/s of wall time, and the
// ClickHouse server's CPU-seconds over it when its process is known
// (CLICKHOUSE_PID, a server of the benchmark's own), else 0.
type copied struct {
	rate, serverCPU float64
}

// serverCopy is ClickHouse's own insert of the rows of srcDB.pages into
// the pages table of a freshly migrated database (its indexes, codecs and
// views), as one INSERT ... SELECT: the most the schema takes on this
// machine, with no client in the way (archivebench prices each index,
// view and codec the same way).
func serverCopy(b *testing.B, addr, srcDB string, n int) copied {
	return serverCopyBy(b, addr, srcDB, n, n)
}

// serverCopyBy is serverCopy in INSERT ... SELECTs of at most batch rows
// each, ranges of the key one after the other: what ClickHouse itself
// takes in inserts the size of the sink's, its parts merged meanwhile
// (the rate is up to the last insert, as the sink's is up to its last
// ack).
func serverCopyBy(b *testing.B, addr, srcDB string, n, batch int) copied {
	_, db := clickhousetest.NewDatabase(b)
	conn, _ := migrated(b, addr, db, nil)
	ctx := context.Background()
	cols := strings.Join(storedColumns(b, conn, srcDB), ", ")
	insert := "INSERT INTO " + db + ".pages (" + cols + ") SELECT " + cols + " FROM " + srcDB + ".pages"
	ranges := []keyRange{{}} // the whole table in one statement
	if batch < n {
		ranges = keyRanges(b, conn, srcDB, batch)
	}
	pid := serverPID()
	cpu0 := proccpu.WithChildren(pid)
	start := time.Now()
	for _, r := range ranges {
		if err := conn.Exec(ctx, insert+r.where, r.args...); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	c := copied{rate: float64(n) / elapsed.Seconds()}
	if pid > 0 {
		c.serverCPU = proccpu.WithChildren(pid) - cpu0
	}
	if got := clickhousetest.Count(b, conn, "SELECT count() FROM "+db+".pages"); got != uint64(n) {
		b.Fatalf("the copy holds %d pages of %d", got, n)
	}
	_ = conn.Exec(ctx, "DROP DATABASE "+db+" SYNC")
	return c
}

// keyRange is a WHERE clause over pages' key and its arguments.
type keyRange struct {
	where string
	args  []any
}

// keyRanges cuts db.pages into consecutive ranges of its key of batch
// rows each, bounded by the key of every batch-th row.
func keyRanges(b *testing.B, conn driver.Conn, db string, batch int) []keyRange {
	var bounds [][2]string
	keys, err := conn.Query(context.Background(), "SELECT toString(crawl_id), url FROM "+db+".pages ORDER BY crawl_id, url")
	if err != nil {
		b.Fatal(err)
	}
	defer keys.Close()
	for i := 0; keys.Next(); i++ {
		var k [2]string
		if err := keys.Scan(&k[0], &k[1]); err != nil {
			b.Fatal(err)
		}
		if i%batch == 0 {
			bounds = append(bounds, k)
		}
	}
	ranges := make([]keyRange, len(bounds))
	for i, from := range bounds {
		ranges[i] = keyRange{" WHERE (crawl_id, url) >= (toUUID(?), ?)", []any{from[0], from[1]}}
		if i+1 < len(bounds) {
			to := bounds[i+1]
			ranges[i].where += " AND (crawl_id, url) < (toUUID(?), ?)"
			ranges[i].args = append(ranges[i].args, to[0], to[1])
		}
	}
	return ranges
}

// storedColumns are the columns of db.pages an insert gives (neither
// ALIAS nor MATERIALIZED), in the table's order.
func storedColumns(b *testing.B, conn driver.Conn, db string) []string {
	var cols []string
	rows, err := conn.Query(context.Background(), "SELECT name FROM system.columns WHERE database = ? AND table = 'pages' AND default_kind NOT IN ('ALIAS', 'MATERIALIZED') ORDER BY position", db)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			b.Fatal(err)
		}
		cols = append(cols, c)
	}
	return cols
}

// sinkServerNote is what ClickHouse spent while the sink ran (its inserts
// and the merges of their parts that ran meanwhile), per row, to read
// beside the copy's.
func sinkServerNote(s sinkRun, n int) string {
	merged := fmt.Sprintf("; ClickHouse's merges read %.1f kB per page meanwhile (uncompressed)", float64(s.merged)/1e3/float64(n))
	if s.serverCPU == 0 {
		return merged
	}
	perRow := func(secs float64) float64 { return 1e6 * secs / float64(n) }
	return fmt.Sprintf("%s; ClickHouse CPU meanwhile %.0f µs per row: merges %.0f, the connections' inserts and queries %.0f, the rest %.0f; merges after the last ack %.0f",
		merged, perRow(s.serverCPU), perRow(s.serverMerges), perRow(s.serverQueries), perRow(s.serverCPU-s.serverMerges-s.serverQueries), perRow(s.mergesAfter))
}

// ClickHouse's thread names: the background merges' pool, and the
// threads that serve a native-protocol connection's queries (an INSERT's
// parsing, views and part writing run there).
const (
	mergeThreads = "MergeMutate"
	queryThreads = "TCPHandler"
)

// serverCPUNote is ClickHouse's CPU per row in each of the copies cs, of
// n rows each.
func serverCPUNote(n int, cs ...copied) string {
	var each []string
	for _, c := range cs {
		if c.serverCPU == 0 {
			return ""
		}
		each = append(each, fmt.Sprintf("%.0f", 1e6*c.serverCPU/float64(n)))
	}
	return "; ClickHouse CPU " + strings.Join(each, ", ") + " µs per row"
}

// serverPID is the benchmark's own ClickHouse process (scripts/clickhouse.sh's
// launcher), 0 when unknown.
func serverPID() int {
	pid, _ := strconv.Atoi(os.Getenv("CLICKHOUSE_PID"))
	return pid
}

// sinkRun is what one run of the sink binary measured.
type sinkRun struct {
	// rate is documents/s from the consumer's creation (migrations done)
	// to the last ack; cpu the sink process's CPU-seconds over the same
	// span.
	rate, cpu float64
	// serverCPU is ClickHouse's CPU-seconds over the run, when its process
	// is known (as for copied), else 0; serverMerges the part of it its
	// merge threads spent, serverQueries its connections' threads (the
	// sink's inserts and reads).
	serverCPU, serverMerges, serverQueries float64
	// mergesAfter is what ClickHouse's merge threads spent after the last
	// ack until no merge ran (the sink's parts merged later), as for
	// serverMerges.
	mergesAfter float64
	// merged is the bytes ClickHouse's merges read over the run, as
	// uncompressed, of every table (the sink's pages and its views' tables:
	// each phase starts on a server merging nothing).
	merged uint64
	rss    int64
	// faults are the sink's minor page faults over the run (see
	// proccpu.MinorFaults).
	faults uint64
	// late is the same from the moment half the messages were acked on:
	// the sink's cost once its heap has reached its working size, as in a
	// sink that has run for a while. Until then much of it is the first
	// touch of the memory the heap grows into (a page fault costs ~15 µs
	// of CPU on the benchmark's machine), paid once in a process's life.
	late struct {
		from   int // the messages acked before it
		cpu    float64
		faults uint64
	}
	profile string
}

// mergedBytes is the bytes ClickHouse's merges have read, as uncompressed,
// since it started.
func mergedBytes(b *testing.B, conn driver.Conn) uint64 {
	return clickhousetest.Count(b, conn, "SELECT sum(value) FROM system.events WHERE event = 'MergedUncompressedBytes'")
}

// runSinkProcess runs the sink binary (tools/sinkprof: cmd/sink with a CPU
// profile) over the pre-filled stream until every message is acked.
func runSinkProcess(b *testing.B, natsURL, addr, db string, n, batch int) sinkRun {
	bin := os.Getenv("BENCH_SINK_BIN")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "sinkprof")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/crawlhouse/crawlhouse/tools/sinkprof").CombinedOutput(); err != nil {
			b.Fatalf("build sink: %v\n%s", err, out)
		}
	}
	profile := filepath.Join(os.TempDir(), fmt.Sprintf("crawlhouse-sink-%s.pprof", time.Now().UTC().Format("20060102T150405")))
	if p := os.Getenv("BENCH_SINK_PROFILE"); p != "" {
		profile = p
	}
	cmd := exec.Command(bin, profile)
	cmd.Env = append(os.Environ(), "NATS_URL="+natsURL, "CLICKHOUSE_ADDR="+addr, "CLICKHOUSE_DATABASE="+db,
		"SINK_LISTEN=127.0.0.1:0", "SINK_BATCH_SIZE="+strconv.Itoa(batch), "LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	nc, js, err := stream.Connect(stream.Config{URL: natsURL}, "bench-watch", zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	// A hung sink ends the run with the context (the benchmark's -timeout
	// would too, without saying which step hung).
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var cons jetstream.Consumer
	for cons == nil {
		if c, err := js.Consumer(ctx, "CRAWL_EVENTS", "sink"); err == nil {
			cons = c
		} else if ctx.Err() != nil {
			b.Fatalf("the sink created no consumer: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	pid := serverPID()
	server := clickhousetest.Open(b, db)
	merged0 := mergedBytes(b, server)
	start, cpu0, server0, threads0 := time.Now(), proccpu.Seconds(cmd.Process.Pid), proccpu.WithChildren(pid), proccpu.Threads(pid)
	faults0 := proccpu.MinorFaults(cmd.Process.Pid)
	var peak int64
	var late0 float64
	var lateFaults0 uint64
	run := sinkRun{}
	for {
		info, err := cons.Info(ctx)
		if err == nil && info.AckFloor.Consumer >= uint64(n) && info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if err == nil && run.late.from == 0 && info.AckFloor.Stream >= uint64(n/2) {
			run.late.from = int(info.AckFloor.Stream)
			late0, lateFaults0 = proccpu.Seconds(cmd.Process.Pid), proccpu.MinorFaults(cmd.Process.Pid)
		}
		if rss := vmHWM(cmd.Process.Pid); rss > peak {
			peak = rss
		}
		if ctx.Err() != nil {
			b.Fatalf("the sink did not ack all %d messages: %v", n, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed, cpuEnd, faultsEnd := time.Since(start), proccpu.Seconds(cmd.Process.Pid), proccpu.MinorFaults(cmd.Process.Pid)
	run.rate, run.cpu, run.profile, run.merged = float64(n)/elapsed.Seconds(), cpuEnd-cpu0, profile, mergedBytes(b, server)-merged0
	run.faults = faultsEnd - faults0
	if run.late.from > 0 {
		run.late.cpu, run.late.faults = cpuEnd-late0, faultsEnd-lateFaults0
	}
	if pid > 0 {
		spent := proccpu.Spent(threads0, proccpu.Threads(pid))
		run.serverCPU = proccpu.WithChildren(pid) - server0
		run.serverMerges, run.serverQueries = spent[mergeThreads], spent[queryThreads]
	}
	if rss := vmHWM(cmd.Process.Pid); rss > peak {
		peak = rss
	}
	// SIGTERM: the sink returns and the profile is written.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	run.rss = peak
	return run
}

// categories name where the sink's CPU goes, each by the functions that
// do that work. A sample counts for the first category one of its frames
// matches, from the innermost frame out: memmove inside CutDocument is the
// Document's split, lz4 inside the insert is compression.
var categories = []struct {
	name  string
	match []string // substrings of a frame's function name
}{
	{"compression (lz4/zstd)", []string{"lz4", "zstd", "klauspost/compress", "compress/"}},
	{"text hash's normalisation", []string{"archive.appendNormalizedText", "archive.skipPlain", "archive.whitespaceAt"}},
	{"hashing", []string{"hash", "city", "xxh", "sha256", "crc32"}},
	{"Document split", []string{"archive.CutDocument", "archive.cutValue", "archive.appendJSONString"}},
	{"column encoding", []string{"ch-go/proto", "clickhouse-go/v2/lib/column", "clickhouse-go/v2.(*batch)", "clickhouse-go/v2/lib/proto"}},
	{"row building", []string{"archive.EventRows", "archive.page", "archive.(*Rows)", "archive.(*Writer).insertPages", "sink.(*Consumer).insertOrIsolate"}},
	{"decode", []string{"events.", "delivery.Decode", "delivery.(*Bodies)", "sink.(*Consumer).decode"}},
	{"network", []string{"syscall", "internal/poll", "net.(*conn)", "bufio"}},
	{"fetch and acks", []string{"nats-io/nats"}}, // pprof spells nats.go nats%2ego
	{"GC", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcDrain"}},
	{"logs, metrics, other", nil},
}

// profileByCategory sums the profile's samples by category (the stacks
// from `go tool pprof -traces`), largest first, on one line (a benchmark's
// log is cut after ten lines).
func profileByCategory(profile string) string {
	out, err := exec.Command("go", "tool", "pprof", "-traces", profile).Output()
	if err != nil {
		return fmt.Sprintf("(pprof -traces: %v)", err)
	}
	sums := make([]float64, len(categories))
	var all float64
	for _, trace := range strings.Split(string(out), "-----------+") {
		lines := strings.Split(strings.TrimSpace(trace), "\n")
		var v float64
		var frames []string
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) == 0 || strings.HasPrefix(f[0], "-") {
				continue
			}
			if d, err := time.ParseDuration(f[0]); err == nil && len(f) >= 2 {
				v = d.Seconds()
				frames = append(frames, f[1])
			} else if v > 0 {
				frames = append(frames, f[0])
			}
		}
		if v == 0 {
			continue
		}
		all += v
	frames:
		for _, fr := range frames {
			for i, c := range categories {
				for _, m := range c.match {
					if strings.Contains(fr, m) {
						sums[i] += v
						break frames
					}
				}
			}
		}
	}
	var attributed float64
	for _, s := range sums {
		attributed += s
	}
	sums[len(sums)-1] = all - attributed
	order := make([]int, len(sums))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(sums[y], sums[x]) })
	parts := []string{fmt.Sprintf("%.2fs sampled", all)}
	for _, i := range order {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", categories[i].name, 100*sums[i]/max(all, 1e-9)))
	}
	return strings.Join(parts, ", ")
}

// vmHWM is a process's peak resident set size, in bytes.
func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// text is n bytes of word-like text (compressible about as real pages are).
func text(n int, seed uint64) string {
	words := []string{"crawl", "page", "archive", "search", "the", "of", "and", "data", "click", "house", "stream", "index", "token", "markdown", "site", "link"}
	r := rand.New(rand.NewPCG(seed, 7))
	var sb strings.Builder
	sb.Grow(n + 16)
	for sb.Len() < n {
		sb.WriteString(words[r.IntN(len(words))])
		if r.IntN(12) == 0 {
			sb.WriteString(strconv.Itoa(r.IntN(100000)))
		}
		sb.WriteByte(' ')
	}
	return sb.String()[:n]
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
