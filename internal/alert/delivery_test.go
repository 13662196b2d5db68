package alert_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/clip"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
)

// TestAlertPublishFailsAfterClaim: a crawl's alert is claimed, then its
// publish fails (the sink's NATS connection is cut) while its POST
// succeeds; once NATS is back the alert is published, and each destination
// got it exactly once. Its failure's error is 2 MiB of crawled text, over
// NATS' max_payload: the alert carries it cut, and fits.
func TestAlertPublishFailsAfterClaim(t *testing.T) {
	t.Parallel()
	wd := newWorld(t)
	h := newHook(t)
	sub, err := wd.nc.SubscribeSync(alert.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := wd.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pub, p := streamtest.ConnectThrough(t, wd.nc.ConnectedUrl())
	p.Cut()
	waitFor(t, "the sink's connection to drop", func() bool { return !pub.IsConnected() })

	a := wd.replicaWith(t, alert.Config{WebhookURL: h.URL, Threshold: 1, Window: time.Hour}, pub)

	crawl := uuid.New()
	huge := strings.Repeat("<é>", 2<<20/4)
	if err := wd.w.Insert(context.Background(), archive.Rows{Failures: []archive.Failure{
		{CrawlID: crawl, WebhookID: uuid.New(), URL: "https://x.test/1", StatusCode: 502, Error: huge, ReceivedAt: time.Now()},
	}}); err != nil {
		t.Fatal(err)
	}
	a.Failed(crawl.String())
	waitFor(t, "the alert POSTed", func() bool { return len(h.posted()) == 1 })
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("an alert published while NATS was cut: %.200s", m.Data)
	}
	p.Mend()
	msg, err := sub.NextMsg(time.Minute)
	if err != nil {
		t.Fatalf("no alert on %s once NATS was back: %v", alert.Subject, err)
	}
	var got alert.Alert
	if err := json.Unmarshal(msg.Data, &got); err != nil {
		t.Fatal(err)
	}
	if got.CrawlID != crawl.String() || !strings.HasPrefix(huge, strings.TrimSuffix(got.LastError, "…")) || len(got.LastError) > clip.MaxField+len("…") {
		t.Errorf("published alert of crawl %s with an error of %d bytes; want crawl %s, its error cut to %d", got.CrawlID, len(got.LastError), crawl, clip.MaxField)
	}
	if m, err := sub.NextMsg(500 * time.Millisecond); err == nil {
		t.Errorf("a second alert published: %.200s", m.Data)
	}
	if n := len(h.posted()); n != 1 || a.Raised() != 1 {
		t.Errorf("%d alerts POSTed, %d raised; want exactly one", n, a.Raised())
	}
}
