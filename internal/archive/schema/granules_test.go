package schema_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// TestMigrateFineGranulesExistingArchive upgrades an archive created with
// 10 MB granules while an INSERT that began before the swap is still
// writing, and checks what users rely on: every page reads back byte for
// byte, the rows of that INSERT are in pages (not dropped with the old
// table), pages has the new setting and no old table is left, and a page
// archived afterwards reaches the views fed by pages.
func TestMigrateFineGranulesExistingArchive(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	archivetest.PagesBefore(t, conn, cfg, 10)
	if s := engineFull(t, conn, cfg, "pages"); strings.Contains(s, "index_granularity_bytes") {
		t.Fatalf("pages before 0010 already sets its granules: %s", s)
	}
	// The rows are written by today's Writer, which names pages.text_hash:
	// the column as 0020 adds it (0010 rebuilds pages with the columns it
	// has, whichever they are).
	if err := conn.Exec(ctx, "ALTER TABLE "+cfg.Database+".pages ADD COLUMN text_hash UInt64 DEFAULT 0"); err != nil {
		t.Fatal(err)
	}
	all := archivetest.RealDeliveries(t)
	if err := archivetest.NewStore(t, conn, cfg).Insert(ctx, all); err != nil {
		t.Fatal(err)
	}
	insertBulk(t, conn, cfg, uuid.New())

	// An INSERT that runs across the swap: 40 rows of ~30 kB, one every
	// 50 ms. It names pages when it begins, so it writes to the table that
	// becomes pages_rebuild; its rows must still end up in pages.
	slowCrawl := uuid.New()
	slow := make(chan error, 1)
	slowID := uuid.NewString()
	go func() {
		slow <- conn.Exec(clickhouse.Context(ctx, clickhouse.WithQueryID(slowID)), fmt.Sprintf(`INSERT INTO %s.pages (crawl_id, job_kind, url, success, status_code, content, markdown_bytes, received_at)
SELECT '%s', 'crawl', concat('https://slow.example/', toString(number)), true, 200,
       repeat(concat('slow page ', toString(number), ' '), 2000), 100, now64(3) + sleepEachRow(0.05)
FROM numbers(40) SETTINGS max_block_size = 1`, cfg.Database, slowCrawl))
	}()
	waitRunning(t, conn, slowID, slow)

	archivetest.MigrateApplies(t, conn, cfg, "0010", "0011")
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	checkOnce(t, all.Pages, storedDocuments(t, conn, cfg))
	if slowRows := clickhousetest.Count(t, conn, "SELECT count() FROM "+cfg.Database+".pages FINAL WHERE crawl_id = ?", slowCrawl); slowRows != 40 {
		t.Errorf("%d of the 40 rows of the INSERT running across the swap are in pages", slowRows)
	}
	wantFineGranules(t, conn, cfg, "after 0010")
	if s := engineFull(t, conn, cfg, "pages_rebuild"); s != "" {
		t.Errorf("pages_rebuild left after the migration: %s", s)
	}

	// Rows written after the migration are cut into ~256 kB granules, and
	// OPTIMIZE FINAL rewrites the parts moved over with 10 MB ones.
	fresh := uuid.New()
	insertBulk(t, conn, cfg, fresh)
	// The parts holding them, read in the same query as their sizes: a
	// merge in the background may replace a part between two reads (and a
	// part it writes is written after the migration too).
	checkGranules(t, conn, cfg, "a part written after the migration",
		"name IN (SELECT _part FROM "+cfg.Database+".pages WHERE crawl_id = '"+fresh.String()+"')")
	if err := conn.Exec(ctx, "OPTIMIZE TABLE "+cfg.Database+".pages FINAL"); err != nil {
		t.Fatal(err)
	}
	checkGranules(t, conn, cfg, "pages after OPTIMIZE FINAL", "1")

	// A page archived after the migration reaches the crawl's statistics,
	// which a materialized view over pages keeps.
	later := archive.Rows{}
	p := all.Pages[0]
	p.CrawlID = uuid.New()
	later.Pages = append(later.Pages, p)
	if err := archivetest.NewStore(t, conn, cfg).Insert(ctx, later); err != nil {
		t.Fatal(err)
	}
	if clickhousetest.Count(t, conn, "SELECT count() FROM "+cfg.Database+".crawl_stats WHERE crawl_id = ?", p.CrawlID) == 0 {
		t.Error("a page archived after the migration did not reach crawl_stats")
	}

	// Run again (as after a crash before the record): nothing changes.
	if err := conn.Exec(ctx, "DELETE FROM "+cfg.Database+".schema_migrations WHERE version = 10"); err != nil {
		t.Fatal(err)
	}
	archivetest.MigrateApplies(t, conn, cfg, "0010")
	checkOnce(t, all.Pages, storedDocuments(t, conn, cfg))
	wantFineGranules(t, conn, cfg, "after 0010 ran twice")
}

// TestMigrateFineGranulesStoppedAfterSwap runs 0010 again from a state a
// crash can leave: the swap done, the old table not yet dropped and holding
// rows. The migration must not swap back, and must keep those rows.
func TestMigrateFineGranulesStoppedAfterSwap(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	all := archivetest.RealDeliveries(t)
	if err := archivetest.NewStore(t, conn, cfg).Insert(ctx, all); err != nil {
		t.Fatal(err)
	}
	// The old table as the swap leaves it: 10 MB granules, holding the
	// rows of an INSERT that ended after the move.
	late := uuid.New()
	for _, s := range []string{
		"CREATE TABLE " + cfg.Database + ".pages_rebuild AS " + cfg.Database + ".pages ENGINE = ReplacingMergeTree(received_at) ORDER BY (crawl_id, url)",
		fmt.Sprintf("INSERT INTO %s.pages_rebuild (crawl_id, job_kind, url, success, status_code, content, markdown_bytes, received_at) SELECT '%s', 'crawl', concat('https://late.example/', toString(number)), true, 200, 'late', 4, now64(3) FROM numbers(3)", cfg.Database, late),
		"DELETE FROM " + cfg.Database + ".schema_migrations WHERE version = 10",
	} {
		if err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	archivetest.MigrateApplies(t, conn, cfg, "0010")
	wantFineGranules(t, conn, cfg, "after 0010 ran again")
	checkOnce(t, all.Pages, storedDocuments(t, conn, cfg))
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM "+cfg.Database+".pages FINAL WHERE crawl_id = ?", late); n != 3 {
		t.Errorf("%d of the 3 rows left in the old table are in pages", n)
	}
}

// insertBulk adds 400 pages of ~32 kB of one crawl to pages: ~13 MB, a
// part in the wide format, which 10 MB granules cut into one or two.
func insertBulk(t *testing.T, conn driver.Conn, cfg archive.Config, crawl uuid.UUID) {
	t.Helper()
	if err := conn.Exec(context.Background(), fmt.Sprintf(`INSERT INTO %s.pages (crawl_id, job_kind, url, success, status_code, content, markdown_bytes, received_at)
SELECT '%s', 'crawl', concat('https://bulk.example/', toString(number)), true, 200,
       repeat(concat('bulk page ', toString(number), ' '), 2500), 100, now64(3)
FROM numbers(400)`, cfg.Database, crawl)); err != nil {
		t.Fatal(err)
	}
}

// checkGranules asserts that the active parts of pages where cond holds
// average granules of at most 512 kB (the setting asks for 256 kB).
func checkGranules(t *testing.T, conn driver.Conn, cfg archive.Config, what, cond string) {
	t.Helper()
	var marks, bytes uint64
	if err := conn.QueryRow(context.Background(), "SELECT sum(marks), sum(data_uncompressed_bytes) FROM system.parts WHERE active AND database = ? AND table = 'pages' AND "+cond, cfg.Database).Scan(&marks, &bytes); err != nil {
		t.Fatal(err)
	}
	if bytes < 10<<20 {
		t.Fatalf("%s: only %d uncompressed bytes, too few to tell granule sizes apart", what, bytes)
	}
	if marks*512<<10 < bytes {
		t.Errorf("%s: %d marks for %d uncompressed bytes: granules average over 512 kB", what, marks, bytes)
	}
}

// engineFull is system.tables.engine_full of a table of cfg's database, ""
// when there is no such table.
func engineFull(t *testing.T, conn driver.Conn, cfg archive.Config, table string) string {
	t.Helper()
	var s []string
	if err := conn.QueryRow(context.Background(), "SELECT groupArray(engine_full) FROM system.tables WHERE database = ? AND name = ?", cfg.Database, table).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return strings.Join(s, "")
}

// wantFineGranules asserts that pages is set to ~256 kB granules.
func wantFineGranules(t *testing.T, conn driver.Conn, cfg archive.Config, when string) {
	t.Helper()
	if s := engineFull(t, conn, cfg, "pages"); !strings.Contains(s, "index_granularity_bytes = 262144") {
		t.Errorf("pages %s: %s, want index_granularity_bytes = 262144", when, s)
	}
}

// waitRunning returns once the query with id shows in system.processes.
// Should the query end first (its result arrives on done), the test's
// premise, a query running across what follows, does not hold: it fails.
func waitRunning(t *testing.T, conn driver.Conn, id string, done <-chan error) {
	t.Helper()
	for clickhousetest.Count(t, conn, "SELECT count() FROM system.processes WHERE query_id = ?", id) == 0 {
		select {
		case err := <-done:
			t.Fatalf("query %s ended (%v) before it was seen running", id, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
