package schema_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/rs/zerolog"
)

// TestMigrationsResumeAfterEveryStatement stops every migration after each
// of its statements, as a sink killed there leaves the archive, and checks
// that migrating then (twice, as the next starts do) ends with the same
// schema and the same rows as a run never stopped. For migration m and k in
// 1..len(statements): a database with the migrations before m applied and
// rows in its tables, the first k statements of m run (m not recorded), then
// the migrator twice. The reference is the same database migrated at once.
// The list is the embedded one, so a migration is covered when it is added.
//
// The migrator runs up to m (the code path of Migrate, the list cut after m):
// what the later migrations make is a function of what m left, and stopping
// there keeps the run time in proportion to the number of statements. The
// databases before each migration are built once, each from the one before
// (migrated, then given rows as that version wrote them), and every case
// starts from a copy.
//
// Each migration also gets two migrators started at once on one database:
// both succeed, it is applied once, and the result is the reference.
func TestMigrationsResumeAfterEveryStatement(t *testing.T) {
	t.Parallel()
	ms, err := schema.Migrations(archive.Config{Database: "crawl"})
	if err != nil {
		t.Fatal(err)
	}
	// One time for every row of every database, recent enough that no TTL
	// removes a row while the test runs.
	base := time.Now().Add(-time.Hour).Truncate(time.Hour).UTC()

	// before[i] holds the migrations before ms[i] and rows; want[i] is
	// what ms[i] run at once makes of it.
	before := make([]string, len(ms))
	want := make([][]string, len(ms))
	_, empty := archivetest.OpenDatabase(t)
	before[0] = empty.Database
	for i := range ms {
		conn, cfg := cloneDatabase(t, before[i])
		migrateTwice(t, conn, cfg, i)
		want[i] = snapshot(t, conn, cfg)
		if i+1 == len(ms) {
			break
		}
		if i == 0 {
			// The real pages, stored as the first schema stored them, go
			// through every later migration.
			insertAsFirstSchema(t, conn, cfg, archivetest.RealDeliveries(t).Pages)
		}
		fillTables(t, conn, cfg, base)
		before[i+1] = cfg.Database
	}
	for i, m := range ms {
		for k := 1; k <= len(m.Statements); k++ {
			t.Run(fmt.Sprintf("%s stopped after statement %d of %d", m.Name, k, len(m.Statements)), func(t *testing.T) {
				t.Parallel()
				conn, cfg := cloneDatabase(t, before[i])
				rendered, err := schema.Migrations(cfg)
				if err != nil {
					t.Fatal(err)
				}
				for _, stmt := range rendered[i].Statements[:k] {
					if err := schema.RunStatement(context.Background(), conn, cfg, stmt); err != nil {
						t.Fatalf("statement before the stop: %v\n%s", err, stmt)
					}
				}
				migrateTwice(t, conn, cfg, i)
				compareSnapshots(t, want[i], snapshot(t, conn, cfg))
			})
		}
		t.Run(m.Name+" by two migrators at once", func(t *testing.T) {
			t.Parallel()
			conn, cfg := cloneDatabase(t, before[i])
			rendered, err := schema.Migrations(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			applied := make([][]string, 2)
			errs := make([]error, 2)
			for j := range 2 {
				c, err := archive.Open(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				wg.Go(func() { applied[j], errs[j] = schema.MigrateOnly(context.Background(), c, cfg, rendered[:i+1]) })
			}
			wg.Wait()
			for j, err := range errs {
				if err != nil {
					t.Errorf("migrator %d: %v", j+1, err)
				}
			}
			if n := len(applied[0]) + len(applied[1]); n != 1 {
				t.Errorf("the two migrators applied %v and %v, want %s once", applied[0], applied[1], m.Name)
			}
			compareSnapshots(t, want[i], snapshot(t, conn, cfg))
		})
	}
}

// cloneDatabase copies the database src into a new one of the test's own:
// every table and view as SHOW CREATE gives it, then every table's parts
// (ATTACH PARTITION ... FROM links the files, nothing is rewritten). Tables
// come before the views that read them.
func cloneDatabase(t *testing.T, src string) (driver.Conn, archive.Config) {
	t.Helper()
	conn, cfg := archivetest.OpenDatabase(t)
	ctx := context.Background()
	rows, err := conn.Query(ctx, "SELECT name, engine, create_table_query FROM system.tables WHERE database = ? ORDER BY engine LIKE '%View', name", src)
	if err != nil {
		t.Fatal(err)
	}
	type table struct{ name, engine, create string }
	var tables []table
	for rows.Next() {
		var tb table
		if err := rows.Scan(&tb.name, &tb.engine, &tb.create); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, tb)
	}
	rows.Close()
	for _, tb := range tables {
		// A dictionary names its source's database alone: DB 'name'.
		create := strings.NewReplacer(src+".", cfg.Database+".", "DB '"+src+"'", "DB '"+cfg.Database+"'").Replace(tb.create)
		if err := conn.Exec(ctx, create); err != nil {
			t.Fatalf("clone %s.%s: %v", src, tb.name, err)
		}
		if strings.HasSuffix(tb.engine, "MergeTree") {
			if err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s.%s ATTACH PARTITION tuple() FROM %s.%s", cfg.Database, tb.name, src, tb.name)); err != nil {
				t.Fatalf("clone the rows of %s.%s: %v", src, tb.name, err)
			}
		}
	}
	return conn, cfg
}

// insertAsFirstSchema archives pages as the sink did under 0001: markdown,
// html and the whole Document each in their column.
func insertAsFirstSchema(t *testing.T, conn driver.Conn, cfg archive.Config, pages []archive.Page) {
	t.Helper()
	batch, err := conn.PrepareBatch(context.Background(), "INSERT INTO "+cfg.Database+".pages (crawl_id, url, scrape_id, webhook_id, origin, success, status_code, title, markdown, html, error, document, received_at, inserted_at)")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if err := batch.Append(p.CrawlID, p.URL, p.ScrapeID, p.WebhookID, p.Origin, p.Success, p.StatusCode,
			p.Title, p.Markdown, p.HTML, p.Error, string(p.Document), p.ReceivedAt, p.ReceivedAt); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

// fillTables inserts three rows into every table of the database that
// stores rows (the materialized views add theirs to crawl_stats), each
// column that takes a value given one derived from the row number: the same
// rows in every database at the same version.
func fillTables(t *testing.T, conn driver.Conn, cfg archive.Config, base time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, table := range archivetest.QueryStrings(t, conn, "SELECT name FROM system.tables WHERE database = ? AND engine LIKE '%MergeTree' AND name != 'schema_migrations' ORDER BY name", cfg.Database) {
		rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ? AND default_kind IN ('', 'DEFAULT') ORDER BY position", cfg.Database, table)
		if err != nil {
			t.Fatal(err)
		}
		var cols, values []string
		for rows.Next() {
			var name, typ string
			if err := rows.Scan(&name, &typ); err != nil {
				t.Fatal(err)
			}
			if v := valueOf(name, typ, base); v != "" {
				cols = append(cols, name)
				values = append(values, v)
			}
		}
		rows.Close()
		q := fmt.Sprintf("INSERT INTO %s.%s (%s) SELECT %s FROM numbers(3)", cfg.Database, table, strings.Join(cols, ", "), strings.Join(values, ", "))
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// valueOf is the expression of row `number` for a column, "" for a type it
// leaves to the column's default (aggregate states, maps, arrays).
func valueOf(col, typ string, base time.Time) string {
	switch {
	case strings.Contains(typ, "AggregateFunction("), strings.HasPrefix(typ, "Map("), strings.HasPrefix(typ, "Array("):
		return ""
	case typ == "UUID":
		return "toUUID(concat('00000000-0000-4000-8000-', leftPad(toString(number % 2), 12, '0')))"
	case typ == "Bool":
		return "number % 2 = 1"
	case strings.HasPrefix(typ, "UInt"), strings.HasPrefix(typ, "Int"):
		return fmt.Sprintf("CAST(number AS %s)", typ)
	case strings.HasPrefix(typ, "DateTime64"):
		return fmt.Sprintf("fromUnixTimestamp64Milli(toInt64(%d + number), 'UTC')", base.UnixMilli())
	case strings.Contains(typ, "String"):
		return fmt.Sprintf("CAST(concat('%s ', toString(number)) AS %s)", col, typ)
	}
	return ""
}

// migrateTwice runs the migrator twice, as two sink starts in a row do, with
// the migrations up to and including ms[i]: the first applies ms[i], the
// second nothing.
func migrateTwice(t *testing.T, conn driver.Conn, cfg archive.Config, i int) {
	t.Helper()
	ctx := context.Background()
	ms, err := schema.Migrations(cfg)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := schema.MigrateOnly(ctx, conn, cfg, ms[:i+1])
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if len(applied) != 1 || applied[0] != ms[i].Name {
		t.Errorf("migrate applied %v, want %s", applied, ms[i].Name)
	}
	again, err := schema.MigrateOnly(ctx, conn, cfg, ms[:i+1])
	if err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	if len(again) != 0 {
		t.Errorf("migrate again applied %v", again)
	}
}

// snapshot is what users of the database rely on, one line per fact, the
// database's name replaced by DB: every table and view as SHOW CREATE gives
// it (columns with their types, defaults, aliases and codecs, indexes,
// engine, key, settings, a view's query), every skip index and whether it is
// built, the migrations recorded, and per table or view its row count and
// a hash of its rows (every column, aliases included, under FINAL where the
// engine collapses rows; aggregate states finalized).
func snapshot(t *testing.T, conn driver.Conn, cfg archive.Config) []string {
	t.Helper()
	ctx := context.Background()
	db := cfg.Database
	var out []string
	out = append(out, archivetest.QueryStrings(t, conn, "SELECT concat(name, ': ', create_table_query) FROM system.tables WHERE database = ? ORDER BY name", db)...)
	out = append(out, archivetest.QueryStrings(t, conn, "SELECT concat('index ', table, '.', name, ' ', type_full, ' ON ', expr, ' GRANULARITY ', toString(granularity), if(data_compressed_bytes > 0, ' built', ' not built')) FROM system.data_skipping_indices WHERE database = ? ORDER BY table, name", db)...)
	out = append(out, archivetest.QueryStrings(t, conn, "SELECT concat('applied ', toString(version), ' ', name, ' ', checksum) FROM "+db+".schema_migrations FINAL ORDER BY version")...)
	type table struct{ name, engine string }
	var tables []table
	rows, err := conn.Query(ctx, "SELECT name, engine FROM system.tables WHERE database = ? AND (engine LIKE '%MergeTree' OR engine = 'View') AND name != 'schema_migrations' ORDER BY name", db)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tb table
		if err := rows.Scan(&tb.name, &tb.engine); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, tb)
	}
	rows.Close()
	for _, tb := range tables {
		var exprs []string
		cols, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ? ORDER BY position", db, tb.name)
		if err != nil {
			t.Fatal(err)
		}
		for cols.Next() {
			var name, typ string
			if err := cols.Scan(&name, &typ); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(typ, "AggregateFunction(") {
				name = "finalizeAggregation(" + name + ")"
			}
			exprs = append(exprs, "ifNull(toString("+name+"), 'NULL')")
		}
		cols.Close()
		if len(exprs) == 0 {
			// A parameterized view (job_removals) lists no columns and
			// answers only with its parameters; its definition is above.
			continue
		}
		final := ""
		if tb.engine != "MergeTree" && tb.engine != "View" {
			final = " FINAL"
		}
		var n, sum uint64
		q := fmt.Sprintf("SELECT count(), sum(cityHash64(%s)) FROM %s.%s%s", strings.Join(exprs, ", "), db, tb.name, final)
		if err := conn.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, fmt.Sprintf("rows %s: %d, hash %x", tb.name, n, sum))
	}
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], db, "DB")
	}
	return out
}

// compareSnapshots reports each line of one snapshot the other lacks.
func compareSnapshots(t *testing.T, want, got []string) {
	t.Helper()
	in := func(lines []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range lines {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	for _, l := range want {
		if !g[l] {
			t.Errorf("as never stopped, not after the stop:\n%s", l)
		}
	}
	for _, l := range got {
		if !w[l] {
			t.Errorf("after the stop, not as never stopped:\n%s", l)
		}
	}
}

// TestMigrationLock: while one migrator holds the lock of a database, no
// other takes it; when the holder's connection ends without releasing it
// (its process killed), the next migrator takes it and migrates. Another
// database is not locked by it.
func TestMigrationLock(t *testing.T) {
	t.Parallel()
	_, cfg := archivetest.OpenDatabase(t)
	// The holder reaches ClickHouse through a proxy whose connections the
	// test cuts, as the kernel does when a process dies.
	proxy := startProxy(t, cfg.Addr)
	holderCfg := cfg
	holderCfg.Addr = proxy.addr
	holder, err := archive.Open(holderCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx := context.Background()
	if _, err := schema.LockMigrations(ctx, holder, cfg); err != nil {
		t.Fatal(err)
	}

	other, err := archive.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = schema.LockMigrations(short, other, cfg)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "wait for the migration lock held by") {
		t.Fatalf("a second migrator took the lock while it was held: %v", err)
	}
	_, elsewhere := archivetest.OpenDatabase(t)
	release, err := schema.LockMigrations(ctx, other, elsewhere)
	if err != nil {
		t.Fatalf("the lock of one database held another's: %v", err)
	}
	release()

	// The holder dies: its connections close, and the server ends the
	// lock query with them.
	proxy.cut()
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	applied, err := schema.Migrate(wait, other, cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("migrate after the holder died: %v", err)
	}
	if len(applied) == 0 {
		t.Error("nothing migrated after the holder died")
	}
}

// proxy forwards TCP connections to a server until cut.
type proxy struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String()}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
	return p
}

// cut closes every connection through the proxy.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
