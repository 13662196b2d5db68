package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// TestDeliveriesToRows: the sender's fixtures and a crawl of pages, signed,
// through the receiver and the sink into ClickHouse; every column checked
// against what was sent. Duplicates inside JetStream's window (the sender's
// retries) and beyond it (a 1 s window here) give one row under FINAL.
func TestDeliveriesToRows(t *testing.T) {
	t.Parallel()
	start := time.Now()
	p := newPipeline(t, "")
	// A duplicate window of 1 s, so that a later retry reaches ClickHouse
	// twice and the table key has to remove it.
	url := p.startReceiver(t, env{"NATS_DEDUP_WINDOW": "1s"})
	p.sinkEnv["NATS_DEDUP_WINDOW"] = "1s"
	p.startSink(t, nil)

	for _, f := range []string{"crawl-page.json", "crawl-page-failed.json", "crawl-completed.json"} {
		body := readFile(t, "../../testdata/fixtures/"+f)
		if a := mustDeliver(t, url, body); !strings.Contains(a, `"accepted"`) {
			t.Errorf("%s: %s", f, a)
		}
		if a := mustDeliver(t, url, body); !strings.Contains(a, `"duplicate"`) {
			t.Errorf("%s again: %s", f, a)
		}
	}
	crawl := uuid.NewString()
	sent := map[string][]byte{}
	for i := range 30 {
		u := fmt.Sprintf("https://site.test/page/%d", i)
		sent[u] = pageBody(crawl, uuid.NewString(), u, fmt.Sprintf("# Page %d\n\nbody of page %d", i, i))
		mustDeliver(t, url, sent[u])
	}
	time.Sleep(1100 * time.Millisecond)
	// The sender's retry after the stream's duplicate window.
	late := sent["https://site.test/page/7"]
	lateAt := time.Now().Add(-time.Second)
	if a := mustDeliver(t, url, late); !strings.Contains(a, `"accepted"`) {
		t.Fatalf("retry beyond the window: %s", a)
	}

	// The retry reached ClickHouse as a second, newer version of page 7
	// (until a merge, a second row; after it, the newer one): under FINAL
	// the key keeps one row a page.
	waitFor(t, 2*time.Minute, "every delivery archived", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl) == 30 &&
			clickhousetest.TryCount(p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ? AND url = 'https://site.test/page/7' AND received_at >= ?", crawl, lateAt) == 1 &&
			clickhousetest.TryCount(p.conn, "SELECT count() FROM crawl_events FINAL") == 1 &&
			clickhousetest.TryCount(p.conn, "SELECT count() FROM failures FINAL") == 1
	})
	if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl); n != 30 {
		t.Errorf("pages under FINAL: %d, want 30", n)
	}

	// Field by field, for the fixture and for each page of the crawl.
	type row struct {
		CrawlID, URL, ScrapeID, WebhookID, Origin, Title, Markdown, HTML, Error, Document string
		Success                                                                           bool
		StatusCode                                                                        uint16
		ReceivedAt                                                                        time.Time
	}
	read := func(crawlID, url string) row {
		var r row
		err := p.conn.QueryRow(context.Background(), `SELECT toString(crawl_id), url, scrape_id, toString(webhook_id), origin,
			title, markdown, html, error, document, success, status_code, received_at
			FROM pages FINAL WHERE crawl_id = ? AND url = ?`, crawlID, url).
			Scan(&r.CrawlID, &r.URL, &r.ScrapeID, &r.WebhookID, &r.Origin, &r.Title, &r.Markdown, &r.HTML, &r.Error, &r.Document, &r.Success, &r.StatusCode, &r.ReceivedAt)
		if err != nil {
			t.Fatalf("row %s: %v", url, err)
		}
		return r
	}
	check := func(body []byte) {
		ev, err := events.DecodeAccepted(body)
		if err != nil {
			t.Fatal(err)
		}
		doc := ev.Data[0]
		failed, reason := events.Failure(ev, &doc)
		got := read(ev.ID, doc.Metadata.PageURL())
		want := row{
			CrawlID: ev.ID, URL: doc.Metadata.PageURL(), ScrapeID: doc.Metadata.ScrapeID, WebhookID: ev.WebhookID,
			Origin: "webhook", Title: doc.Metadata.Title, Markdown: doc.Markdown, HTML: doc.HTML, Error: reason,
			Document: string(doc.Raw), Success: !failed, StatusCode: uint16(doc.Metadata.StatusCode), ReceivedAt: got.ReceivedAt,
		}
		if got != want {
			t.Errorf("row of %s\n got %+v\nwant %+v", want.URL, got, want)
		}
		if got.ReceivedAt.Before(start.Add(-time.Second)) || got.ReceivedAt.After(time.Now()) {
			t.Errorf("received_at %v", got.ReceivedAt)
		}
		// Every field of the Document is kept, unknown ones included.
		var m map[string]any
		if err := json.Unmarshal([]byte(got.Document), &m); err != nil {
			t.Errorf("document is not JSON: %v", err)
		}
	}
	check(readFile(t, "../../testdata/fixtures/crawl-page.json"))
	check(readFile(t, "../../testdata/fixtures/crawl-page-failed.json"))
	for _, body := range sent {
		check(body)
	}

	var fURL, fErr string
	var fCode uint16
	if err := p.conn.QueryRow(context.Background(), "SELECT url, status_code, error FROM failures FINAL WHERE toString(webhook_id) = '3b2f1c9e-8d7a-4c6b-9e5f-0a1b2c3d4e5f'").Scan(&fURL, &fCode, &fErr); err != nil {
		t.Fatal(err)
	}
	if fURL != "https://example.com/broken" || fCode != 0 || fErr != "Request failed with status code 502" {
		t.Errorf("failure row %s %d %s", fURL, fCode, fErr)
	}
	var pages, failures uint64
	var last string
	if err := p.conn.QueryRow(context.Background(), "SELECT pages_received, failures, last_event FROM crawls WHERE crawl_id = '5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c'").Scan(&pages, &failures, &last); err != nil {
		t.Fatal(err)
	}
	if pages != 2 || failures != 1 || last != "crawl.completed" {
		t.Errorf("crawls row: pages %d failures %d last %q", pages, failures, last)
	}
}
