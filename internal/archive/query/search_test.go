package query_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
)

// TestSearchQueries runs every SQL block of docs/search.md against archived
// fixtures, in a database of the test's own, and checks that the token
// searches find the page.
func TestSearchQueries(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	archivetest.InsertFixtures(t, w)
	// A later crawl of the same site, its home page's text changed: what the
	// queries across crawls look for (crawl id as in docs/search.md).
	later := strings.Replace(string(archivetest.ReadFixture(t, "crawl-page.json")), "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", "a3c1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e", 1)
	later = strings.Replace(later, "This domain is for use in illustrative examples.", "This domain is for use in documentation examples.", 1)
	archivetest.InsertDelivery(t, w, later, time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	// Events that are not pages, as the 2026 sender makes them.
	for _, golden := range []string{"firecrawl-extract/0002-extract.completed.body", "firecrawl-monitor/0004-monitor.page.body"} {
		archivetest.InsertDelivery(t, w, string(archivetest.ReadFixture(t, golden)), time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	}
	if _, err := w.RecordBlockedURLs(context.Background(), "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", []string{"https://example.com/private/"}); err != nil {
		t.Fatal(err)
	}

	// Two complete crawls of one scope on another host, the later one no
	// longer finding a page: what the queries of removals look for.
	scope := `{"scope":"docs.example.com /docs","limit":500}`
	docsPages := []string{"https://docs.example.com/docs/a", "https://docs.example.com/docs/b"}
	archivetest.CrawlSite(t, w, "0193e000-0000-7000-8000-000000000001", scope, "crawl.completed", docsPages, time.Now().Add(-2*time.Hour))
	archivetest.CrawlSite(t, w, "0193e000-0000-7000-8000-000000000002", scope, "crawl.completed", docsPages[:1], time.Now().Add(-time.Hour))

	doc, err := os.ReadFile("../../../docs/search.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 5 {
		t.Fatalf("docs/search.md has %d sql blocks", len(blocks))
	}
	ctx := context.Background()
	for _, b := range blocks {
		query := strings.ReplaceAll(b[1], "crawl.", cfg.Database+".")
		rows, err := conn.Query(ctx, query)
		if err != nil {
			t.Errorf("query failed: %v\n%s", err, b[1])
			continue
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Errorf("query failed: %v\n%s", err, b[1])
		}
		rows.Close()
		if n == 0 {
			t.Errorf("query found nothing:\n%s", b[1])
		}
	}

	// The searches are case-insensitive and match whole tokens.
	for _, tc := range []struct {
		where string
		want  uint64
	}{
		{"hasAnyTokens(markdown, 'ILLUSTRATIVE')", 1},
		{"hasAllTokens(title, 'Example Domain')", 2},
		{"hasAllTokens(title, 'example missing')", 0},
		{"hasAnyTokens(markdown, 'illustr')", 0},
		// A phrase: the words next to each other, in order, checked as typed.
		{"hasPhrase(markdown, 'illustrative examples')", 1},
		{"hasPhrase(markdown, 'illustrative  examples.')", 1},
		{"hasPhrase(markdown, 'examples illustrative')", 0},
		{"hasPhrase(markdown, 'domain illustrative')", 0},
		// host and content_hash are computed on insert.
		{"host = 'example.com'", 3},
		{"url = 'https://example.com/' AND content_hash = cityHash64(markdown)", 2},
	} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".pages FINAL WHERE "+tc.where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != tc.want {
			t.Errorf("%s: %d rows, want %d", tc.where, n, tc.want)
		}
	}
}
