package archive_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/takedown"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// takedownRows are two jobs of a site whose page /secret is to be taken
// down: its versions, a failure of it, a raw event naming it and a monitor
// check of it, beside a page that stays.
func takedownRows(jobs [2]uuid.UUID, at time.Time) archive.Rows {
	var rows archive.Rows
	for i, job := range jobs {
		for _, url := range []string{"https://site.test/secret", "https://site.test/public"} {
			rows.Pages = append(rows.Pages, archive.Page{CrawlID: job, URL: url, WebhookID: uuid.New(), Origin: archive.OriginWebhook,
				Success: true, StatusCode: 200, Markdown: fmt.Sprintf("%s in job %d", url, i), ReceivedAt: at})
		}
	}
	rows.Failures = []archive.Failure{{CrawlID: jobs[0], WebhookID: uuid.New(), URL: "https://site.test/secret", StatusCode: 500, Reason: "failed", ReceivedAt: at}}
	rows.RawEvents = []archive.RawEvent{
		{JobID: "extract-1", Type: "extract.completed", WebhookID: uuid.New(), Success: true, Event: []byte(`{"data":[{"source":"https://site.test/secret"}]}`), ReceivedAt: at},
		{JobID: "extract-2", Type: "extract.completed", WebhookID: uuid.New(), Success: true, Event: []byte(`{"data":[{"source":"https://site.test/public"}]}`), ReceivedAt: at},
	}
	rows.MonitorPages = []archive.MonitorPage{{MonitorPage: events.MonitorPage{CheckID: "check-1", MonitorID: "m", URL: "https://site.test/secret", Status: "same"}, WebhookID: uuid.New(), ReceivedAt: at}}
	return rows
}

// TestTakedownRemovesAndKeepsOut takes one URL down: every row of it goes
// from every table, the audit record says how many, and neither a replayed
// delivery nor a backfill brings it back until the takedown is lifted.
func TestTakedownRemovesAndKeepsOut(t *testing.T) {
	t.Parallel()
	conn, cfg := startClickHouse(t)
	ctx := context.Background()
	w := newStore(t, conn, cfg)
	jobs := [2]uuid.UUID{uuid.New(), uuid.New()}
	rows := takedownRows(jobs, time.Now().UTC().Truncate(time.Millisecond))
	if err := w.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	count := func(table, where string) uint64 {
		return clickhousetest.Count(t, conn, "SELECT count() FROM "+cfg.Database+"."+table+" WHERE "+where)
	}

	// noneLeft fails the test for each table holding a row of the URL.
	noneLeft := func(t *testing.T, when string) {
		t.Helper()
		for table, where := range map[string]string{"pages": "url = 'https://site.test/secret'", "failures": "1", "page_versions": "url = 'https://site.test/secret'",
			"monitor_pages": "1", "events": "job_id = 'extract-1'"} {
			if n := count(table, where); n != 0 {
				t.Errorf("%s, %s holds %d rows of the URL taken down", when, table, n)
			}
		}
	}

	sel, err := takedown.NewSelector(takedown.KindURL, "https://site.test/secret")
	if err != nil {
		t.Fatal(err)
	}
	td := archive.Takedown{ID: uuid.New(), Selector: sel, Reason: "legal request 42", RequestedBy: "ops@example.test", CreatedAt: time.Now().UTC()}
	if err := w.RecordTakedown(ctx, td); err != nil {
		t.Fatal(err)
	}
	deleted, err := archive.Purge(ctx, conn, cfg, sel)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"pages": 2, "failures": 1, "page_versions": 2, "blocked_urls": 0, "monitor_pages": 1, "events": 1}
	if !maps.Equal(deleted, want) {
		t.Errorf("rows removed: %v, want %v", deleted, want)
	}
	td.Deleted = deleted
	if err := w.RecordTakedown(ctx, td); err != nil {
		t.Fatal(err)
	}
	noneLeft(t, "after the takedown")
	if n := count("pages", "url = 'https://site.test/public'"); n != 2 {
		t.Errorf("pages holds %d versions of the page not taken down, want 2", n)
	}
	if n := count("events", "job_id = 'extract-2'"); n != 1 {
		t.Errorf("the raw event not naming the URL: %d rows, want 1", n)
	}
	got, err := w.Takedown(ctx, td.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Selector != sel || got.Reason != td.Reason || got.RequestedBy != td.RequestedBy || !maps.Equal(got.Deleted, want) || got.LiftedAt != nil {
		t.Errorf("audit record %+v, want the selector, reason, requester and counts", got)
	}

	// The deliveries replayed (a redrive, the stream read again), a
	// backfill of the job: the URL stays out, the rest goes in.
	if err := w.Insert(ctx, takedownRows(jobs, time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	docs := []events.Document{
		{Markdown: "back", Metadata: events.Metadata{URL: "https://site.test/secret", StatusCode: 200}},
		{Markdown: "new", Metadata: events.Metadata{URL: "https://site.test/new", StatusCode: 200}},
	}
	if n, err := w.RecordBlockedURLs(ctx, jobs[1].String(), []string{"https://site.test/secret", "https://site.test/robots"}); err != nil || n != 1 {
		t.Errorf("blocked URLs recorded after the takedown: %d (%v), want 1 (not the URL taken down)", n, err)
	}
	if n, err := w.InsertBackfill(ctx, jobs[1].String(), events.KindCrawl, docs); err != nil || n != 1 {
		t.Errorf("backfill after the takedown archived %d pages (%v), want 1 (not the URL taken down)", n, err)
	}
	noneLeft(t, "after a replay and a backfill")
	if n := count("pages", "url = 'https://site.test/new'"); n != 1 {
		t.Errorf("the backfilled page not taken down: %d rows, want 1", n)
	}

	// Lifted, the URL is archived again.
	lifted := time.Now().UTC()
	td.LiftedAt, td.LiftedBy, td.LiftReason = &lifted, "ops@example.test", "request withdrawn"
	if err := w.RecordTakedown(ctx, td); err != nil {
		t.Fatal(err)
	}
	if err := w.Insert(ctx, takedownRows(jobs, time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	if n := count("pages FINAL", "url = 'https://site.test/secret'"); n != 2 {
		t.Errorf("after the lift, %d versions of the URL archived again, want 2", n)
	}
}
