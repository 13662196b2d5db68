package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// TestReplayedFailuresAlertOnce: failed pages of a crawl raise an alert.
// Their signed bodies, captured, are sent again once the stream's duplicate
// window has forgotten them and the alert's claim has expired, to a sink
// process started after the first one stopped: the receiver accepts them
// (only the body is signed), but no second alert is raised, the failure
// counts do not move, and the failures table keeps the first record. The
// real receiver and sink binaries, a 1 s duplicate window.
func TestReplayedFailuresAlertOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	alerts := map[string]int{} // crawl id → alerts POSTed
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a struct {
			CrawlID string `json:"crawlId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			t.Errorf("alert POST: %v", err)
		}
		mu.Lock()
		alerts[a.CrawlID]++
		mu.Unlock()
	}))
	defer hook.Close()
	alerted := func(crawl string) int {
		mu.Lock()
		defer mu.Unlock()
		return alerts[crawl]
	}

	p := newPipeline(t, "")
	rec := startReceiverBinary(t, env{"WEBHOOK_SECRETS": secret, "NATS_URL": p.natsURL, "NATS_DEDUP_WINDOW": "1s", "LOG_LEVEL": "warn"})
	url := "http://" + rec.addr + "/webhooks/crawl"
	sinkEnv := maps.Clone(p.sinkEnv)
	delete(sinkEnv, "SINK_LISTEN")
	maps.Copy(sinkEnv, env{"NATS_DEDUP_WINDOW": "1s", "ALERT_WEBHOOK_URL": hook.URL, "ALERT_FAILURE_THRESHOLD": "3", "ALERT_WINDOW": "60s"})

	// A crawl's three failed pages: one alert. The window counts by the
	// time the receiver accepted them, and the sink (started here with no
	// listener to wait on) may still be migrating when they arrive: a
	// window of a minute, so that a slow machine's start does not put them
	// out of it.
	first := startSinkBinary(t, sinkEnv)
	crawl := uuid.NewString()
	var bodies [][]byte
	for i := range 3 {
		body := failedBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/broken/%d", i))
		bodies = append(bodies, body)
		mustDeliver(t, url, body)
	}
	waitFor(t, 2*time.Minute, "the crawl's alert", func() bool { return alerted(crawl) == 1 })
	if got := first.metric(t, "crawlhouse_page_failures_total"); got != "3" {
		t.Errorf("first sink counted %s failed pages, want 3", got)
	}
	first.stop()

	// The alert's claim expires one window later: from then on, failures
	// counted anew would raise another.
	_, js := streamtest.Connect(t, p.natsURL)
	ctx := context.Background()
	claims, err := js.KeyValue(ctx, stream.AlertClaimsBucket)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the alert's claim to expire", func() bool {
		_, err := claims.Get(ctx, crawl)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})

	// The same signed bodies again, each sent until the stream has
	// forgotten it and the receiver takes it for new.
	second := startSinkBinary(t, sinkEnv)
	replayedAt := time.Now().Add(-time.Second)
	for _, body := range bodies {
		waitFor(t, 2*time.Minute, "the duplicate window to forget a delivery", func() bool {
			code, answer := deliver(t, url, body)
			if code != http.StatusOK {
				t.Fatalf("replay answered %d %s", code, answer)
			}
			return strings.Contains(answer, `"accepted"`)
		})
	}
	// The replays are archived: their page rows are newer versions.
	waitFor(t, 2*time.Minute, "the replayed deliveries archived", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ? AND received_at >= ?", crawl, replayedAt) == 3
	})
	// Two crawls that fail afterwards alert, each once: once the second one's
	// alert is in, every check the replays could have woken is done (one sink
	// commits and checks in order).
	for _, later := range []string{uuid.NewString(), uuid.NewString()} {
		for i := range 3 {
			mustDeliver(t, url, failedBody(later, uuid.NewString(), fmt.Sprintf("https://later.test/%d", i)))
		}
		waitFor(t, 2*time.Minute, "a later crawl's alert", func() bool { return alerted(later) == 1 })
	}

	if n := alerted(crawl); n != 1 {
		t.Errorf("%d alerts for the replayed crawl, want 1", n)
	}
	if got := second.metric(t, "crawlhouse_page_failures_total"); got != "6" {
		t.Errorf("second sink counted %s failed pages, want the later crawls' 6 (the replays are no new failures)", got)
	}
	if n := clickhousetest.Count(t, p.conn, "SELECT failures FROM crawls WHERE crawl_id = ?", crawl); n != 3 {
		t.Errorf("crawls.failures %d, want 3", n)
	}
	if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM failures WHERE crawl_id = ? AND received_at >= ?", crawl, replayedAt); n != 0 {
		t.Errorf("%d failure rows recorded for the replays; the first records must stand", n)
	}
	if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM failures FINAL WHERE crawl_id = ?", crawl); n != 3 {
		t.Errorf("failures under FINAL %d, want 3", n)
	}
}
