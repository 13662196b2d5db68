package archive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/backfill"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

const fixtureCrawl = "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"

func TestInsert(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	archivetest.InsertFixtures(t, w)
	ctx := context.Background()

	var pages uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".pages FINAL").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages != 2 {
		t.Errorf("pages under FINAL: %d, want 2 (the page once, the failed page)", pages)
	}
	var (
		url, scrape, origin, title, markdown, errText, doc string
		success                                            bool
		code                                               uint16
		received                                           time.Time
	)
	if err := conn.QueryRow(ctx, "SELECT url, scrape_id, origin, success, status_code, title, markdown, error, document, received_at FROM "+cfg.Database+".pages FINAL WHERE crawl_id = ? AND url = 'https://example.com/'", fixtureCrawl).
		Scan(&url, &scrape, &origin, &success, &code, &title, &markdown, &errText, &doc, &received); err != nil {
		t.Fatal(err)
	}
	ev, _ := archivetest.DecodeFixture(t, "crawl-page.json")
	if scrape != "7c9e6679-7425-40de-944b-e07fc1f90ae7" || origin != "webhook" || !success || code != 200 ||
		title != "Example Domain" || markdown != ev.Data[0].Markdown || errText != "" || doc != string(ev.Data[0].Raw) {
		t.Errorf("page row: %s %s %s %v %d %q %q %q %s", url, scrape, origin, success, code, title, markdown, errText, doc)
	}
	// The newest version wins under FINAL: the redelivery received 3 s later.
	if want := time.Date(2026, 11, 22, 10, 0, 3, 0, time.UTC); !received.Equal(want) {
		t.Errorf("received_at %v, want %v", received, want)
	}

	var failures uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".failures FINAL WHERE crawl_id = ?", fixtureCrawl).Scan(&failures); err != nil {
		t.Fatal(err)
	}
	if failures != 1 {
		t.Errorf("failures: %d, want 1", failures)
	}

	c, err := w.Crawl(ctx, fixtureCrawl)
	if err != nil {
		t.Fatal(err)
	}
	if c.PagesReceived != 2 || c.Failures != 1 || c.LastEvent != "crawl.completed" || c.PagesBackfilled != 0 ||
		c.FirstDeliveryAt == nil || !c.FirstDeliveryAt.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) ||
		c.LastDeliveryAt == nil || !c.LastDeliveryAt.Equal(time.Date(2026, 11, 22, 10, 0, 3, 0, time.UTC)) {
		t.Errorf("crawl %+v", c)
	}
	if _, err := w.Crawl(ctx, "00000000-0000-4000-8000-000000000001"); !errors.Is(err, archive.ErrNoCrawl) {
		t.Errorf("unknown crawl: %v", err)
	}
}

// TestBackfill covers the API the backfill uses: which URLs exist, inserting
// the missing ones, and the backfill state.
func TestBackfill(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	archivetest.InsertFixtures(t, w)
	ctx := context.Background()

	urls := []string{"https://example.com/", "https://example.com/broken", "https://example.com/new"}
	have, err := w.ExistingURLs(ctx, fixtureCrawl, urls)
	if err != nil {
		t.Fatal(err)
	}
	// A failed page is present too: the backfill never inserts it again.
	if !have["https://example.com/"] || !have["https://example.com/broken"] || have["https://example.com/new"] || len(have) != 2 {
		t.Errorf("existing %v", have)
	}

	var docs []events.Document
	for _, u := range urls[1:] {
		ev := archivetest.MustDecode(t, `{"success":true,"type":"crawl.page","id":"`+fixtureCrawl+`","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","data":[{"markdown":"recovered","metadata":{"sourceURL":"`+u+`","statusCode":200,"extra":"kept"}}]}`)
		docs = append(docs, ev.Data[0])
	}
	n, err := w.InsertBackfill(ctx, fixtureCrawl, "crawl", docs)
	if err != nil || n != 2 {
		t.Fatalf("InsertBackfill: %d, %v", n, err)
	}
	have, err = w.ExistingURLs(ctx, fixtureCrawl, urls)
	if err != nil || len(have) != 3 {
		t.Errorf("after backfill, existing %v %v", have, err)
	}
	rows, err := conn.Query(ctx, "SELECT url, origin, toString(webhook_id), success, document FROM "+cfg.Database+".pages FINAL WHERE crawl_id = ? AND origin = 'backfill' ORDER BY url", fixtureCrawl)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for rows.Next() {
		var url, origin, webhook, doc string
		var success bool
		if err := rows.Scan(&url, &origin, &webhook, &success, &doc); err != nil {
			t.Fatal(err)
		}
		if url != urls[i+1] || webhook != "00000000-0000-0000-0000-000000000000" || !success || doc != string(docs[i].Raw) {
			t.Errorf("backfilled row %s %s %s %v %s", url, origin, webhook, success, doc)
		}
		i++
	}
	rows.Close()
	if i != 2 {
		t.Errorf("%d backfilled rows, want 2", i)
	}

	if err := w.SetBackfillState(ctx, fixtureCrawl, backfill.StateRunning, ""); err != nil {
		t.Fatal(err)
	}
	if err := w.SetBackfillState(ctx, fixtureCrawl, backfill.StateDone, "fetched 3, inserted 2"); err != nil {
		t.Fatal(err)
	}
	c, err := w.Crawl(ctx, fixtureCrawl)
	if err != nil {
		t.Fatal(err)
	}
	if c.BackfillState != "done" || c.PagesBackfilled != 2 || c.PagesReceived != 2 {
		t.Errorf("crawl %+v", c)
	}
}
