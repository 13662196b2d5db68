package sinkcmd_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// TestConsumerPendingGauge: crawlhouse_sink_consumer_pending is the backlog
// the durable consumer had not delivered as of the last fetch, and 0 once
// the sink has caught up.
func TestConsumerPendingGauge(t *testing.T) {
	t.Parallel()
	const messages, batch = 30, 5
	e := setup(t)
	e["SINK_BATCH_SIZE"] = fmt.Sprint(batch)
	p := newPublisher(t, e["NATS_URL"])
	crawl := uuid.NewString()
	for i := range messages {
		p.publish(t, pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "page body"))
	}

	// The first batch is held after its insert until the gauge has been
	// read. The fetch runs one batch ahead, so by then the sink has fetched
	// two batches and stops: the backlog stands still at messages-2×batch.
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	s := startSink(t, e, sinkcmd.Options{CrashAfterInsert: func() bool { <-release; return false }})
	t.Cleanup(unblock) // runs before the sink's stop
	metrics := "http://" + s.addr + "/metrics"
	held := fmt.Sprintf("crawlhouse_sink_consumer_pending %d", messages-2*batch)
	waitFor(t, 2*time.Minute, held, func() bool { _, m := httpGet(t, metrics); return hasSample(m, held) })

	unblock()
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "every page", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl) == messages
	})
	waitFor(t, 2*time.Minute, "no backlog", func() bool {
		_, m := httpGet(t, metrics)
		return hasSample(m, "crawlhouse_sink_consumer_pending 0") &&
			hasSample(m, fmt.Sprintf(`crawlhouse_sink_rows_inserted_total{table="pages"} %d`, messages))
	})
}
