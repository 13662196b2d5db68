package archive_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// TestOldCompatibilityProfile: a server upgraded in place keeps the
// `compatibility` of its older release, here 25.8, which turns the text
// index's reading off. The archive migrates, the Writer archives pages and
// every documented search answers through the text indexes (EXPLAIN
// indexes = 1: the index is consulted and skips parts), the reader's
// Search finds the page: the settings they need travel with the
// statements.
//
// The profile is the connection's here (the local server takes no users
// configuration): ClickHouse applies a session's compatibility as a
// profile's, to every setting the session does not set itself.
func TestOldCompatibilityProfile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr, db := clickhousetest.NewDatabase(t)
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.OpenWithSettings(cfg, clickhouse.Settings{"compatibility": "25.8"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	var compat string
	if err := conn.QueryRow(ctx, "SELECT getSetting('compatibility')").Scan(&compat); err != nil || compat != "25.8" {
		t.Fatalf("compatibility %q (%v), want 25.8", compat, err)
	}
	// What the profile turns off, every statement of the archive turns on
	// again (on 26.7 compatibility 25.8 sets the last two to 0).
	for _, name := range []string{"enable_full_text_index", "use_skip_indexes", "use_skip_indexes_on_data_read", "use_skip_indexes_for_disjunctions"} {
		var on bool
		if err := conn.QueryRow(ctx, "SELECT toBool(getSetting(?))", name).Scan(&on); err != nil || !on {
			t.Errorf("%s is off (%v) under compatibility 25.8: the archive's statements do not set it", name, err)
		}
	}
	if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		t.Fatalf("Migrate under compatibility 25.8: %v", err)
	}
	// Merges stopped: every insert stays a part of its own, the parts an
	// index must skip.
	if err := conn.Exec(ctx, "SYSTEM STOP MERGES "+cfg.Database+".pages"); err != nil {
		t.Fatal(err)
	}
	w := archivetest.NewStore(t, conn, cfg)
	archivetest.InsertFixtures(t, w)
	// Pages of other crawls that hold none of the searched words.
	page := string(archivetest.ReadFixture(t, "crawl-page.json"))
	for i := range 24 {
		body := strings.Replace(page, "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", uuid.NewString(), 1)
		body = strings.Replace(body, "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", uuid.NewString(), 1)
		body = strings.Replace(body, `"markdown":"# Example Domain\n\nThis domain is for use in illustrative examples."`, fmt.Sprintf(`"markdown":"# Filler %d\n\nNothing searched for."`, i), 1)
		body = strings.Replace(body, `"title":"Example Domain"`, fmt.Sprintf(`"title":"Filler %d"`, i), 1)
		if strings.Contains(body, "illustrative") {
			t.Fatal("filler page still holds the searched words")
		}
		archivetest.InsertDelivery(t, w, body, time.Date(2026, 11, 22, 12, i, 0, 0, time.UTC))
	}

	doc, err := os.ReadFile("../../docs/search.md")
	if err != nil {
		t.Fatal(err)
	}
	searched, allSkipped := 0, 0
	for _, b := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if !strings.Contains(b[1], "Tokens(") && !strings.Contains(b[1], "hasToken(") {
			continue
		}
		searched++
		query := strings.ReplaceAll(b[1], "crawl.", cfg.Database+".")
		if n := countRows(t, conn, query); n == 0 {
			t.Errorf("query found nothing under compatibility 25.8:\n%s", b[1])
		}
		// A phrase search's index is in its inner query, which EXPLAIN of
		// the outer one does not show.
		if inner := regexp.MustCompile(`(?s)GLOBAL IN \(\s*(SELECT .*?)\)\s+AND`).FindStringSubmatch(query); inner != nil {
			query = inner[1]
		}
		skipped, total := textIndexParts(t, conn, query)
		if total == 0 {
			t.Errorf("query does not use its text index under compatibility 25.8:\n%s", b[1])
		}
		allSkipped += skipped
	}
	if allSkipped == 0 {
		t.Error("no documented search skipped a part by its text index under compatibility 25.8")
	}
	if searched < 4 {
		t.Fatalf("docs/search.md has %d token searches", searched)
	}

	// The reader's Search under the same profile (its index use is not
	// visible from here: it finds the page).
	r, err := query.NewReader(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The reader's queries, as the server ran them: they read the part
	// that holds the word and the index skipped the others.
	// The first search learns which optional settings the server knows,
	// from system.settings; the second reads only pages.
	if _, err := r.Search(ctx, query.SearchQuery{Text: "illustrative"}); err != nil {
		t.Fatal(err)
	}
	found, err := r.Search(ctx, query.SearchQuery{Text: "illustrative"})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Hits) != 1 || found.Hits[0].URL != "https://example.com/" {
		t.Fatalf("Search(illustrative) under compatibility 25.8: %+v, want the one page", found.Hits)
	}
}

func countRows(t *testing.T, conn driver.Conn, query string) int {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	return n
}

// textIndexParts runs EXPLAIN indexes = 1 of query and returns, summed over
// its reads of pages, the parts its text indexes skipped and the parts
// they were asked about.
func textIndexParts(t *testing.T, conn driver.Conn, query string) (skipped, total int) {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN indexes = 1 "+query)
	if err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	re := regexp.MustCompile(`Name: (?:markdown|title)_text\s+Description: [^\n]*\s+(?:Condition: [^\n]*\s+)?Parts: (\d+)/(\d+)`)
	for _, m := range re.FindAllStringSubmatch(plan.String(), -1) {
		kept, _ := strconv.Atoi(m[1])
		of, _ := strconv.Atoi(m[2])
		skipped += of - kept
		total += of
	}
	if total == 0 {
		t.Logf("plan without a text index:\n%s", plan.String())
	}
	return skipped, total
}
