package archive_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/google/uuid"
)

// TestPriorFailures: a failure already recorded is told from a new one by
// what the archive holds, not by the time that passed. The same delivery
// received again later (a replay) is PriorDelivery, another delivery of a
// URL that failed before is PriorPage, and the same message redelivered by
// JetStream (the same received_at, to the nanosecond it was stamped with)
// is new, like a failure of a URL or a crawl not seen yet. A failure
// without a URL is only ever the same delivery.
func TestPriorFailures(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	crawl, other := uuid.New(), uuid.New()
	first := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond).Add(123456 * time.Nanosecond)
	failed := func(crawl uuid.UUID, webhook uuid.UUID, url string, at time.Time) archive.Failure {
		return archive.Failure{CrawlID: crawl, JobKind: "crawl", WebhookID: webhook, URL: url, Error: "Request failed with status code 502", ReceivedAt: at}
	}
	hookA, hookB, hookEmpty := uuid.New(), uuid.New(), uuid.New()
	recorded := []archive.Failure{
		failed(crawl, hookA, "https://a.test/1", first),
		failed(crawl, uuid.Nil, "https://a.test/backfilled", first), // the backfill's
		failed(crawl, hookEmpty, "", first),
	}
	if err := w.Insert(ctx, archive.Rows{Failures: recorded}); err != nil {
		t.Fatal(err)
	}
	later := first.Add(time.Hour)
	for _, tc := range []struct {
		name string
		f    archive.Failure
		want archive.Prior
	}{
		{"replayed delivery", failed(crawl, hookA, "https://a.test/1", later), archive.PriorDelivery},
		{"replayed delivery, a millisecond later", failed(crawl, hookA, "https://a.test/1", first.Add(time.Millisecond)), archive.PriorDelivery},
		{"the same message redelivered", failed(crawl, hookA, "https://a.test/1", first), archive.PriorNone},
		{"another delivery of a failed URL", failed(crawl, hookB, "https://a.test/1", later), archive.PriorPage},
		{"a delivery of a URL the backfill recorded", failed(crawl, hookB, "https://a.test/backfilled", later), archive.PriorPage},
		{"a new URL", failed(crawl, hookA, "https://a.test/2", later), archive.PriorNone},
		{"the URL in another crawl", failed(other, hookA, "https://a.test/1", later), archive.PriorNone},
		{"no URL, replayed", failed(crawl, hookEmpty, "", later), archive.PriorDelivery},
		{"no URL, another delivery", failed(crawl, hookB, "", later), archive.PriorNone},
		{"recorded after it was received", failed(crawl, hookA, "https://a.test/1", first.Add(-time.Minute)), archive.PriorNone},
	} {
		got, err := w.PriorFailures(ctx, []archive.Failure{tc.f})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// Many at once, in order, across crawls.
	var many []archive.Failure
	var want []archive.Prior
	for i := range 1200 {
		many = append(many, failed(other, uuid.New(), fmt.Sprintf("https://b.test/%d", i), later))
		want = append(want, archive.PriorNone)
		if i%100 == 0 {
			many = append(many, failed(crawl, hookA, "https://a.test/1", later))
			want = append(want, archive.PriorDelivery)
		}
	}
	got, err := w.PriorFailures(ctx, many)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("batch: %v", err)
	}
}

// TestRecentFailuresReplayed: failures count in the window of their first
// record. A delivery replayed an hour later (as the sink inserts it: the
// failure row left out, archive.PriorDelivery) and another delivery of a
// URL that failed then are not recent failures, so no alert is raised again.
func TestRecentFailuresReplayed(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	crawl := uuid.New()
	then := time.Now().Add(-time.Hour)
	var fs []archive.Failure
	for i := range 3 {
		fs = append(fs, archive.Failure{CrawlID: crawl, WebhookID: uuid.New(), URL: fmt.Sprintf("https://a.test/%d", i), Error: "boom", ReceivedAt: then})
	}
	if err := w.Insert(ctx, archive.Rows{Failures: fs}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	again := archive.Failure{CrawlID: crawl, WebhookID: uuid.New(), URL: "https://a.test/0", Error: "boom again", ReceivedAt: now}
	fresh := archive.Failure{CrawlID: crawl, WebhookID: uuid.New(), URL: "https://a.test/new", Error: "new", ReceivedAt: now}
	if err := w.Insert(ctx, archive.Rows{Failures: []archive.Failure{again, fresh}}); err != nil {
		t.Fatal(err)
	}
	r, err := w.RecentFailures(ctx, crawl.String(), now.Add(-10*time.Minute))
	if err != nil || r.Failures != 1 || r.LastURL != "https://a.test/new" || r.LastError != "new" {
		t.Fatalf("recent %+v %v, want the new URL only", r, err)
	}
	r, err = w.RecentFailures(ctx, crawl.String(), then.Add(-time.Minute))
	if err != nil || r.Failures != 4 {
		t.Fatalf("over both windows %+v %v, want 4 URLs", r, err)
	}
	c, err := w.Crawl(ctx, crawl.String())
	if err != nil || c.Failures != 4 {
		t.Fatalf("crawls %+v %v", c, err)
	}
}
