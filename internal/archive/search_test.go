package archive_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestSearchQueries runs every SQL block of docs/search.md against archived
// fixtures, in a database of the test's own, and checks that the token
// searches find the page.
func TestSearchQueries(t *testing.T) {
	t.Parallel()
	conn, cfg := startClickHouse(t)
	w := newWriter(t, conn, cfg)
	insertFixtures(t, w)

	doc, err := os.ReadFile("../../docs/search.md")
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
		{"hasAllTokens(title, 'Example Domain')", 1},
		{"hasAllTokens(title, 'example missing')", 0},
		{"hasAnyTokens(markdown, 'illustr')", 0},
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
