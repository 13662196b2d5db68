package archive_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// cancelledError is the crawl API's text for every page a cancellation left
// unscraped.
const cancelledError = "This scrape was not completed because the parent crawl or batch scrape was cancelled. This happens when you call the cancel endpoint on a crawl or batch scrape, or when the operation is stopped for another reason. Any URLs that were already scraped before cancellation are still available in the results."

// TestBatchScrapeArchivedLikeCrawl: batch_scrape.page deliveries become
// pages and failures rows like crawl.page, with their kind, their webhook
// metadata, and a `crawls` row of kind batch_scrape.
func TestBatchScrapeArchivedLikeCrawl(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	job := uuid.NewString()
	at := time.Now().UTC()
	ids := func() string { return fmt.Sprintf(`"id":%q,"webhookId":%q`, job, uuid.NewString()) }
	// A millisecond apart, as the sender sends them: the last event is the
	// one received last (at one instant, any of them could be).

	archivetest.InsertDelivery(t, w, `{"success":true,"type":"batch_scrape.started",`+ids()+`,"data":[],"metadata":{"team":"search"}}`, at)
	archivetest.InsertDelivery(t, w, `{"success":true,"type":"batch_scrape.page",`+ids()+`,"data":[{"markdown":"# one","metadata":{"url":"https://b.example/1","statusCode":200,"title":"One"}}],"metadata":{"team":"search"}}`, at.Add(1*time.Millisecond))
	archivetest.InsertDelivery(t, w, `{"success":true,"type":"batch_scrape.page",`+ids()+`,"data":[{"markdown":"gone","metadata":{"url":"https://b.example/2","statusCode":404}}],"metadata":{"team":"search"}}`, at.Add(2*time.Millisecond))
	archivetest.InsertDelivery(t, w, `{"success":false,"type":"batch_scrape.page",`+ids()+`,"data":[{"metadata":{"sourceURL":"https://b.example/3"}}],"error":"All scraping engines failed","metadata":{"team":"search"}}`, at.Add(3*time.Millisecond))
	archivetest.InsertDelivery(t, w, `{"success":true,"type":"batch_scrape.completed",`+ids()+`,"data":[],"metadata":{"team":"search"}}`, at.Add(4*time.Millisecond))

	var pages, batchPages uint64
	var md string
	if err := conn.QueryRow(ctx, "SELECT count(), countIf(job_kind = 'batch_scrape'), any(webhook_metadata) FROM "+cfg.Database+".pages FINAL WHERE crawl_id = ?",
		uuid.MustParse(job)).Scan(&pages, &batchPages, &md); err != nil {
		t.Fatal(err)
	}
	if pages != 3 || batchPages != 3 || md != `{"team":"search"}` {
		t.Fatalf("pages %d, of kind batch_scrape %d, webhook_metadata %q; want 3, 3, {\"team\":\"search\"}", pages, batchPages, md)
	}
	c, err := w.Crawl(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != events.KindBatchScrape || c.PagesReceived != 3 || c.Failures != 2 || c.CancelledPages != 0 || c.LastEvent != events.TypeBatchScrapeCompleted {
		t.Fatalf("crawls row %+v, want kind batch_scrape, 3 pages, 2 failures, last event batch_scrape.completed", c)
	}
	r, err := w.RecentFailures(ctx, job, at.Add(-time.Minute))
	if err != nil || r.Failures != 2 || r.Kind != events.KindBatchScrape {
		t.Fatalf("RecentFailures %+v %v, want 2 of a batch_scrape", r, err)
	}
}

// TestCancelledPagesAreNotFailures: the failed pages a cancellation sends,
// one per queued URL, are recorded with reason cancelled, counted apart in
// `crawls`, and never counted by alerts; a real failure beside them is.
func TestCancelledPagesAreNotFailures(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	job := uuid.NewString()
	at := time.Now().UTC()
	ids := func() string { return fmt.Sprintf(`"id":%q,"webhookId":%q`, job, uuid.NewString()) }
	// A millisecond apart, as the sender sends them: the last event is the
	// one received last (at one instant, any of them could be).

	archivetest.InsertDelivery(t, w, `{"success":true,"type":"crawl.page",`+ids()+`,"data":[{"markdown":"ok","metadata":{"url":"https://c.example/","statusCode":200}}]}`, at.Add(5*time.Millisecond))
	archivetest.InsertDelivery(t, w, `{"success":false,"type":"crawl.page",`+ids()+`,"data":[{"metadata":{"sourceURL":"https://c.example/broken"}}],"error":"Request failed with status code 502"}`, at.Add(6*time.Millisecond))
	for i := range 50 {
		archivetest.InsertDelivery(t, w, fmt.Sprintf(`{"success":false,"type":"crawl.page",%s,"data":[{"metadata":{"sourceURL":"https://c.example/q/%d"}}],"error":%q}`, ids(), i, cancelledError), at)
	}
	archivetest.InsertDelivery(t, w, `{"success":true,"type":"crawl.cancelled",`+ids()+`,"data":[]}`, at.Add(7*time.Millisecond))

	var failed, cancelled uint64
	if err := conn.QueryRow(ctx, "SELECT countIf(reason = 'failed'), countIf(reason = 'cancelled') FROM "+cfg.Database+".failures FINAL WHERE crawl_id = ?",
		uuid.MustParse(job)).Scan(&failed, &cancelled); err != nil {
		t.Fatal(err)
	}
	if failed != 1 || cancelled != 50 {
		t.Fatalf("failures: %d failed, %d cancelled; want 1 and 50", failed, cancelled)
	}
	r, err := w.RecentFailures(ctx, job, at.Add(-time.Minute))
	if err != nil || r.Failures != 1 || r.LastURL != "https://c.example/broken" {
		t.Fatalf("RecentFailures %+v %v, want the one real failure", r, err)
	}
	c, err := w.Crawl(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != events.KindCrawl || c.Failures != 1 || c.CancelledPages != 50 || c.LastEvent != events.TypeCrawlCancelled {
		t.Fatalf("crawls row %+v, want 1 failure, 50 cancelled pages, last event crawl.cancelled", c)
	}
}
