package archive_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// backfillDoc is a Document as GET /v2/crawl/{id} lists it.
func backfillDoc(t *testing.T, url string, status int) events.Document {
	t.Helper()
	ev := archivetest.MustDecode(t, fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":"x","metadata":{"url":%q,"statusCode":%d}}]}`,
		fixtureCrawl, uuid.NewString(), url, status))
	return ev.Data[0]
}

// deliverPage archives a crawl.page webhook of one Document.
func deliverPage(t *testing.T, w *archive.Store, crawlID, webhookID, url string, status int) {
	t.Helper()
	body := archivetest.PageBodyWithID(t, crawlID, webhookID, url, "x", status)
	rows, err := archive.EventRows(archivetest.MustDecode(t, body), []byte(body), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// TestExistingURLsLongURLs: hundreds of URLs of 3-4 KB each (well past
// max_query_size were they in the query text) get an exact answer, in
// several chunks, including a URL stored only as a failure.
func TestExistingURLsLongURLs(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()

	urls := make([]string, 1300)
	for i := range urls {
		// Quotes, backslashes, tabs and non-ASCII must survive the
		// parameter's quoting.
		urls[i] = fmt.Sprintf("https://example.com/p/%d?q='x'\\\t\u00e9&pad=%s", i, strings.Repeat("a", 3000+i%1000))
	}
	want := map[string]bool{}
	var docs []events.Document
	for i, u := range urls {
		if i%3 == 0 {
			docs = append(docs, backfillDoc(t, u, 200))
			want[u] = true
		}
	}
	if _, err := w.InsertBackfill(ctx, fixtureCrawl, "crawl", docs); err != nil {
		t.Fatal(err)
	}
	deliverPage(t, w, fixtureCrawl, uuid.NewString(), urls[1], 404)
	want[urls[1]] = true
	// The same URL in another crawl is not this crawl's.
	deliverPage(t, w, "00000000-0000-4000-8000-000000000009", uuid.NewString(), urls[2], 200)

	have, err := w.ExistingURLs(ctx, fixtureCrawl, urls)
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != len(want) {
		t.Errorf("%d URLs reported, want %d", len(have), len(want))
	}
	for u := range want {
		if !have[u] {
			t.Errorf("archived URL %.60s… not reported", u)
		}
	}
	for u := range have {
		if !want[u] {
			t.Errorf("URL %.60s… reported, not archived", u)
		}
	}
	if have, err := w.ExistingURLs(ctx, fixtureCrawl, nil); err != nil || len(have) != 0 {
		t.Errorf("no URLs: %v %v", have, err)
	}
}

// TestFailuresCountOncePerURL: a URL that failed on delivery and again in a
// backfill is one failed page for alerts and for `crawls`, and failures the
// backfill recorded (all with the zero webhook id) count one per URL.
func TestFailuresCountOncePerURL(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)

	deliverPage(t, w, fixtureCrawl, uuid.NewString(), "https://example.com/a", 404)
	// Redelivered under another webhook id.
	deliverPage(t, w, fixtureCrawl, uuid.NewString(), "https://example.com/a", 404)
	docs := []events.Document{
		backfillDoc(t, "https://example.com/a", 404),
		backfillDoc(t, "https://example.com/b", 500),
		backfillDoc(t, "https://example.com/c", 410),
		backfillDoc(t, "https://example.com/ok", 200),
	}
	if _, err := w.InsertBackfill(ctx, fixtureCrawl, "crawl", docs); err != nil {
		t.Fatal(err)
	}
	r, err := w.RecentFailures(ctx, fixtureCrawl, since)
	if err != nil || r.Failures != 3 {
		t.Fatalf("RecentFailures %+v %v, want 3", r, err)
	}
	c, err := w.Crawl(ctx, fixtureCrawl)
	if err != nil || c.Failures != 3 {
		t.Fatalf("crawls row %+v %v, want 3 failures", c, err)
	}
	if r, err := w.RecentFailures(ctx, fixtureCrawl, time.Now().Add(time.Hour)); err != nil || r.Failures != 0 {
		t.Fatalf("RecentFailures in the future %+v %v", r, err)
	}
}

// TestMigrationCountsStoredFailures: a database at 0003 with failures
// stored is upgraded, and `crawls` counts the failures it already held once
// per URL.
func TestMigrationCountsStoredFailures(t *testing.T) {
	t.Parallel()
	addr, db := clickhousetest.NewDatabase(t)
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := context.Background()
	ms, err := schema.Migrations(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > 3 {
			continue
		}
		for _, s := range m.Statements {
			if err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
		}
	}
	// What a sink of that version wrote: a delivered 404, and three
	// backfilled failures (zero webhook id), in the columns of 0003.
	insertFailure := func(webhookID uuid.UUID, url string) {
		t.Helper()
		if err := conn.Exec(ctx, "INSERT INTO "+db+".failures (crawl_id, webhook_id, url, status_code, error, received_at) VALUES (?, ?, ?, 404, 'HTTP 404', now64(3))",
			uuid.MustParse(fixtureCrawl), webhookID, url); err != nil {
			t.Fatal(err)
		}
	}
	insertFailure(uuid.New(), "https://example.com/a")
	for _, u := range []string{"https://example.com/a", "https://example.com/b", "https://example.com/c"} {
		insertFailure(uuid.Nil, u)
	}
	var before uint64
	if err := conn.QueryRow(ctx, "SELECT failures FROM "+db+".crawls WHERE crawl_id = ?", uuid.MustParse(fixtureCrawl)).Scan(&before); err != nil || before != 2 {
		// The count 0003 gave: two webhook ids (one of them zero).
		t.Fatalf("before the upgrade: %d failures, %v", before, err)
	}

	applied, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(applied, "0004_crawl_failures_by_url.sql") {
		t.Fatalf("applied %v", applied)
	}
	w := archivetest.NewStore(t, conn, cfg)
	if c, err := w.Crawl(ctx, fixtureCrawl); err != nil || c.Failures != 3 {
		t.Fatalf("after the upgrade %+v %v, want 3 failures", c, err)
	}
	deliverPage(t, w, fixtureCrawl, uuid.NewString(), "https://example.com/d", 500)
	if c, err := w.Crawl(ctx, fixtureCrawl); err != nil || c.Failures != 4 {
		t.Fatalf("after a new failure %+v %v, want 4 failures", c, err)
	}
}
