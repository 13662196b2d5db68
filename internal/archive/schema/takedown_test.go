package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
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
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	w := archivetest.NewStore(t, conn, cfg)
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
	deleted, err := schema.Purge(ctx, conn, cfg, sel)
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

// TestTakedownCoversEverySpelling takes down hosts, prefixes and URLs named
// in one spelling while the archive holds their pages in others (case, the
// final dot, IDNA and Unicode forms, percent escapes, userinfo, default
// ports): the count shown before (Count) and the purge cover them all and
// nothing of the neighbours that merely start alike (other hosts, longer
// path segments, other schemes and ports); the write path's filter then
// refuses every spelling and lets the neighbours in.
func TestTakedownCoversEverySpelling(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	w := archivetest.NewStore(t, conn, cfg)
	for _, tc := range []struct {
		name    string
		kind    takedown.Kind
		value   string
		covered []string
		kept    []string
	}{
		{"host", takedown.KindHost, "example.com",
			[]string{"https://example.com/a", "https://Example.com/b", "https://EXAMPLE.COM/c", "https://example.com./d", "https://example.com:443/e",
				"http://EXAMPLE.com.:80/f", "https://user@Example.Com./g", "https://exa%6Dple.com/h", "https://ＥＸＡＭＰＬＥ.com/i", "https://example.com:8443/j"},
			[]string{"https://example.community/", "https://example.com.evil.test/", "https://evil.test/?u=https://example.com/", "https://www.example.com/",
				"https://evil.test\\@example.com/"}},
		{"unicode host", takedown.KindHost, "BÜCHER.example.",
			[]string{"https://bücher.example/a", "https://Bücher.Example./b", "https://xn--bcher-kva.example/c", "https://XN--BCHER-KVA.EXAMPLE.:443/d",
				"https://b%C3%BCcher.example/e", "https://bücher。example/f"},
			[]string{"https://bücher.example.evil.test/", "https://bucher.example/"}},
		{"prefix of an origin", takedown.KindPrefix, "https://example.org",
			[]string{"https://example.org", "https://example.org/x", "https://EXAMPLE.org./y?z", "https://example.org:443/"},
			[]string{"https://example.organic/", "https://example.org.evil.test/", "http://example.org/", "https://example.org:8443/"}},
		{"prefix of a path", takedown.KindPrefix, "https://site.test/private",
			[]string{"https://site.test/private", "https://SITE.test./private/x", "https://site.test/private?x=1", "https://site.test:443/private#top"},
			[]string{"https://site.test/privateer", "https://site.test/public", "https://site.test/Private"}},
		{"url", takedown.KindURL, "https://url.test/page",
			[]string{"https://url.test/page", "https://URL.test./page", "https://url.test:443/page"},
			[]string{"https://url.test/page/2", "https://url.test/pag", "https://url.test/page?x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := uuid.New()
			deliver := func() error {
				return w.Insert(ctx, spellingRows(job, append(slices.Clone(tc.covered), tc.kept...)))
			}
			if err := deliver(); err != nil {
				t.Fatal(err)
			}
			sel, err := takedown.NewSelector(tc.kind, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			n := uint64(len(tc.covered))
			want := map[string]uint64{"pages": n, "failures": 0, "page_versions": n, "blocked_urls": 0, "monitor_pages": 0, "events": 2 * n}
			if shown, err := schema.Count(ctx, conn, cfg, sel); err != nil || !maps.Equal(shown, want) {
				t.Errorf("rows counted before the takedown: %v (%v), want %v", shown, err, want)
			}
			if err := w.RecordTakedown(ctx, archive.Takedown{ID: uuid.New(), Selector: sel, Reason: "spellings", CreatedAt: time.Now().UTC()}); err != nil {
				t.Fatal(err)
			}
			if deleted, err := schema.Purge(ctx, conn, cfg, sel); err != nil || !maps.Equal(deleted, want) {
				t.Errorf("rows removed: %v (%v), want %v", deleted, err, want)
			}
			left := func() []string {
				var urls []string
				rows, err := conn.Query(ctx, "SELECT url FROM "+cfg.Database+".pages WHERE crawl_id = ? UNION ALL SELECT JSONExtractString(event, 'url') FROM "+cfg.Database+".events WHERE job_id = ?", job, job.String())
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				for rows.Next() {
					var u string
					if err := rows.Scan(&u); err != nil {
						t.Fatal(err)
					}
					urls = append(urls, u)
				}
				slices.Sort(urls)
				return slices.Compact(urls)
			}
			kept := slices.Sorted(slices.Values(tc.kept))
			if got := left(); !slices.Equal(got, kept) {
				t.Errorf("after the takedown the archive holds %q, want only %q", got, kept)
			}
			// Delivered again in every spelling: only the neighbours go in.
			if err := conn.Exec(ctx, "TRUNCATE TABLE "+cfg.Database+".events"); err != nil {
				t.Fatal(err)
			}
			if err := deliver(); err != nil {
				t.Fatal(err)
			}
			if got := left(); !slices.Equal(got, kept) {
				t.Errorf("after deliveries in every spelling the archive holds %q, want only %q", got, kept)
			}
		})
	}
}

// spellingRows are a page and two raw events of each URL.
func spellingRows(job uuid.UUID, urls []string) archive.Rows {
	var rows archive.Rows
	at := time.Now().UTC()
	for _, u := range urls {
		rows.Pages = append(rows.Pages, archive.Page{CrawlID: job, URL: u, WebhookID: uuid.New(), Origin: archive.OriginWebhook, Success: true, StatusCode: 200, Markdown: "page of " + u, ReceivedAt: at})
		body, _ := json.Marshal(map[string]string{"url": u})
		// The same, as an encoder that escapes '/' and non-ASCII writes it.
		escaped := `{"url":` + strings.ReplaceAll(strconv.QuoteToASCII(u), "/", `\/`) + `}`
		for _, b := range []string{string(body), escaped} {
			rows.RawEvents = append(rows.RawEvents, archive.RawEvent{JobID: job.String(), Type: "extract.completed", WebhookID: uuid.New(), Success: true, Event: []byte(b), ReceivedAt: at})
		}
	}
	return rows
}

// TestTakedownManySpellings: spellings of a host that together exceed what
// one statement may name (here 400 userinfo variants of 1 000 bytes) are
// all counted and removed, over several statements.
func TestTakedownManySpellings(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	w := archivetest.NewStore(t, conn, cfg)
	var urls []string
	for i := range 400 {
		urls = append(urls, fmt.Sprintf("https://%s%03d@Many.test./page", strings.Repeat("u", 997), i))
	}
	job := uuid.New()
	if err := w.Insert(ctx, spellingRows(job, append(urls, "https://many.test.evil.test/page"))); err != nil {
		t.Fatal(err)
	}
	sel, err := takedown.NewSelector(takedown.KindHost, "many.test")
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := schema.Purge(ctx, conn, cfg, sel)
	if err != nil {
		t.Fatal(err)
	}
	if deleted["pages"] != 400 || deleted["events"] != 800 {
		t.Errorf("rows removed: %v, want 400 pages and 800 events", deleted)
	}
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM "+cfg.Database+".pages"); n != 1 {
		t.Errorf("%d pages left, want 1 (the other host's)", n)
	}
}
