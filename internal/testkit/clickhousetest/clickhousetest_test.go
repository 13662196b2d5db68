package clickhousetest_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

// pagesDDL is shaped like an archive table: ReplacingMergeTree keyed by the
// page, versioned, with a full-text index on the page body.
const pagesDDL = `CREATE TABLE pages (
	crawl_id String,
	url      String,
	version  UInt64,
	markdown String,
	INDEX markdown_text markdown TYPE text(tokenizer = splitByNonAlpha, preprocessor = lower(markdown))
) ENGINE = ReplacingMergeTree(version)
ORDER BY (crawl_id, url)`

type page struct {
	crawlID, url string
	version      uint64
	markdown     string
}

func insertPages(t *testing.T, conn driver.Conn, pages ...page) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO pages (crawl_id, url, version, markdown)")
	if err != nil {
		t.Fatalf("prepare batch: %v", err)
	}
	for _, p := range pages {
		if err := batch.Append(p.crawlID, p.url, p.version, p.markdown); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("send batch: %v", err)
	}
}

// TestReplacingMergeTreeFinal proves the real engine is behind the helper:
// a duplicate insert is visible as a second row until FINAL collapses it to
// the highest version.
func TestReplacingMergeTreeFinal(t *testing.T) {
	t.Parallel()
	_, db := clickhousetest.NewDatabase(t)
	conn := clickhousetest.Open(t, db)
	ctx := context.Background()
	if err := conn.Exec(ctx, pagesDDL); err != nil {
		t.Fatalf("create table: %v", err)
	}

	insertPages(t, conn,
		page{"c1", "https://example.com/a", 1, "# A\nFirst version"},
		page{"c1", "https://example.com/b", 1, "# B"},
		page{"c2", "https://example.com/a", 1, "# A of another crawl"},
	)
	// The sender retried: the same page again, as a separate insert (part).
	insertPages(t, conn, page{"c1", "https://example.com/a", 2, "# A\nSecond version"})

	if got := clickhousetest.Count(t, conn, "SELECT count() FROM pages"); got != 4 {
		t.Errorf("rows without FINAL = %d, want 4 (two parts, not merged yet)", got)
	}
	if got := clickhousetest.Count(t, conn, "SELECT count() FROM pages FINAL"); got != 3 {
		t.Errorf("rows with FINAL = %d, want 3", got)
	}
	var body string
	if err := conn.QueryRow(ctx, "SELECT markdown FROM pages FINAL WHERE crawl_id = 'c1' AND url = 'https://example.com/a'").Scan(&body); err != nil {
		t.Fatal(err)
	}
	if body != "# A\nSecond version" {
		t.Errorf("FINAL kept %q, want the highest version", body)
	}
}

// TestTextIndex pins the full-text index syntax and the search functions the
// schema relies on (ClickHouse 26.x `text` index; tokens are lower-cased by
// the preprocessor, and the same preprocessing applies to the search terms).
func TestTextIndex(t *testing.T) {
	t.Parallel()
	_, db := clickhousetest.NewDatabase(t)
	conn := clickhousetest.Open(t, db)
	ctx := context.Background()
	if err := conn.Exec(ctx, pagesDDL); err != nil {
		t.Fatalf("create table: %v", err)
	}
	insertPages(t, conn,
		page{"c1", "https://example.com/zebra", 1, "Hello World: a rare Zebra appears"},
		page{"c1", "https://example.com/cats", 1, "All about cats and dogs"},
	)
	for _, tc := range []struct {
		name, where string
		want        uint64
	}{
		{"hasToken", "hasToken(markdown, 'zebra')", 1},
		{"hasAnyTokens", "hasAnyTokens(markdown, ['zebra', 'cats'])", 2},
		{"hasAllTokens", "hasAllTokens(markdown, ['hello', 'zebra'])", 1},
		{"hasAllTokens none", "hasAllTokens(markdown, ['hello', 'cats'])", 0},
		{"hasAnyTokens string", "hasAnyTokens(markdown, 'dogs zebra')", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := clickhousetest.Count(t, conn, "SELECT count() FROM pages FINAL WHERE "+tc.where); got != tc.want {
				t.Errorf("%s: %d rows, want %d", tc.where, got, tc.want)
			}
		})
	}

	// The index is used, not just the function evaluated row by row.
	rows, err := conn.Query(ctx, "EXPLAIN indexes = 1 SELECT url FROM pages WHERE hasToken(markdown, 'zebra')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan += line + "\n"
	}
	if !regexp.MustCompile(`Name: markdown_text`).MatchString(plan) {
		t.Errorf("EXPLAIN does not show the text index:\n%s", plan)
	}
}

// TestDatabasesAreIsolated checks that NewDatabase names are unique and valid.
func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	_, db1 := clickhousetest.NewDatabase(t)
	_, db2 := clickhousetest.NewDatabase(t)
	if db1 == db2 {
		t.Fatalf("NewDatabase returned %q twice", db1)
	}
	if !regexp.MustCompile(`^t_testdatabasesareisolated_[0-9a-f]{8}$`).MatchString(db1) {
		t.Errorf("database name %q", db1)
	}
}

// TestServerPersistsAcrossRestart stops a server cleanly and starts another
// on the same data directory: the table and its rows are still there.
func TestServerPersistsAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()

	first := clickhousetest.StartServer(t, dir)
	conn := openServer(t, first)
	if err := conn.Exec(ctx, "CREATE DATABASE archive"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "CREATE TABLE archive.pages (url String, version UInt64) ENGINE = ReplacingMergeTree(version) ORDER BY url"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "INSERT INTO archive.pages VALUES ('a', 1), ('b', 1), ('a', 2)"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	start := time.Now()
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))

	second := clickhousetest.StartServer(t, dir)
	conn = openServer(t, second)
	if got := clickhousetest.Count(t, conn, "SELECT count() FROM archive.pages FINAL"); got != 2 {
		t.Errorf("after restart: %d rows with FINAL, want 2", got)
	}
}

func openServer(t *testing.T, s *clickhousetest.Server) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(clickhousetest.Options(s.Addr, "default"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
