package archive_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

const errorsCrawl = "0190a4c6-7f3e-7a4c-9b2d-5e8f1a2b3c4d"

func failedDoc(t *testing.T, url, reason string) events.Document {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"metadata": map[string]string{"sourceURL": url, "error": reason}})
	var d events.Document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// A failure recovered from the errors endpoint is one failures row and one
// failed pages row of origin backfill: present for ExistingURLs, counted
// once per URL in RecentFailures and crawls.failures. A document that is
// not a failure is refused.
func TestInsertBackfillFailures(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)

	docs := []events.Document{failedDoc(t, "https://example.com/a", "Request failed with status code 502"),
		failedDoc(t, "https://example.com/b", "cancelled")}
	n, err := w.InsertBackfillFailures(ctx, errorsCrawl, "crawl", docs)
	if err != nil || n != 2 {
		t.Fatalf("InsertBackfillFailures: %d %v", n, err)
	}
	have, err := w.ExistingURLs(ctx, errorsCrawl, []string{"https://example.com/a", "https://example.com/b", "https://example.com/c"})
	if err != nil || !have["https://example.com/a"] || !have["https://example.com/b"] || len(have) != 2 {
		t.Fatalf("existing %v %v", have, err)
	}
	var origin, webhook, reason string
	var success bool
	if err := conn.QueryRow(ctx, "SELECT origin, toString(webhook_id), success, error FROM "+cfg.Database+".pages FINAL WHERE crawl_id = ? AND url = 'https://example.com/a'",
		uuid.MustParse(errorsCrawl)).Scan(&origin, &webhook, &success, &reason); err != nil {
		t.Fatal(err)
	}
	if origin != archive.OriginBackfill || webhook != uuid.Nil.String() || success || reason != "Request failed with status code 502" {
		t.Fatalf("page row %s %s %v %q", origin, webhook, success, reason)
	}
	recent, err := w.RecentFailures(ctx, errorsCrawl, before)
	if err != nil || recent.Failures != 2 {
		t.Fatalf("RecentFailures %+v %v", recent, err)
	}
	c, err := w.Crawl(ctx, errorsCrawl)
	if err != nil || c.Failures != 2 || c.PagesBackfilled != 2 {
		t.Fatalf("crawls row %+v %v", c, err)
	}

	var ok events.Document
	json.Unmarshal([]byte(`{"markdown":"fine","metadata":{"sourceURL":"https://example.com/c","statusCode":200}}`), &ok)
	if _, err := w.InsertBackfillFailures(ctx, errorsCrawl, "crawl", []events.Document{ok}); err == nil {
		t.Fatal("a successful document was recorded as a failure")
	}
	if _, err := w.InsertBackfillFailures(ctx, errorsCrawl, "crawl", []events.Document{failedDoc(t, "", "x")}); err == nil {
		t.Fatal("a failure without a URL was recorded")
	}
}

// Robots-blocked URLs are recorded once, queryable in blocked_urls, and
// neither pages nor failures.
func TestRecordBlockedURLs(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	urls := []string{"https://example.com/private/1", "https://example.com/private/0", "https://example.com/private/1", ""}
	for run, want := range []int{2, 0} {
		n, err := w.RecordBlockedURLs(ctx, errorsCrawl, urls)
		if err != nil || n != want {
			t.Fatalf("run %d: inserted %d %v, want %d", run+1, n, err, want)
		}
	}
	got, err := w.BlockedURLs(ctx, errorsCrawl)
	if err != nil || !slices.Equal(got, []string{"https://example.com/private/0", "https://example.com/private/1"}) {
		t.Fatalf("blocked %v %v", got, err)
	}
	var rows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".blocked_urls WHERE crawl_id = ?", uuid.MustParse(errorsCrawl)).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d rows %v", rows, err)
	}
	recent, err := w.RecentFailures(ctx, errorsCrawl, time.Now().Add(-time.Hour))
	if err != nil || recent.Failures != 0 {
		t.Fatalf("blocked URLs counted as failures: %+v %v", recent, err)
	}
	have, err := w.ExistingURLs(ctx, errorsCrawl, urls[:2])
	if err != nil || len(have) != 0 {
		t.Fatalf("blocked URLs taken for pages: %v %v", have, err)
	}
}
