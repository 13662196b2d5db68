package sinkcmd_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
	const messages, batch, inFlight = 30, 5, 2
	e := setup(t)
	e["SINK_BATCH_SIZE"] = fmt.Sprint(batch)
	e["SINK_INSERTS_IN_FLIGHT"] = fmt.Sprint(inFlight)
	p := newPublisher(t, e["NATS_URL"])
	crawl := uuid.NewString()
	for i := range messages {
		p.publish(t, pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "page body"))
	}

	// Every insert is held until the gauge has been read. The fetch runs
	// one batch ahead of the inserts in flight, so by then the sink has
	// fetched inFlight+1 batches and stops: the backlog stands still at
	// messages-(inFlight+1)×batch.
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	s := startSink(t, e, sinkcmd.Options{WrapBatchWriter: wrapInsert(func() error { <-release; return nil })})
	t.Cleanup(unblock) // runs before the sink's stop
	metrics := "http://" + s.addr + "/metrics"
	held := fmt.Sprintf("crawlhouse_sink_consumer_pending %d", messages-(inFlight+1)*batch)
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

// TestLagAgeAndDeliveryLatency: while deliveries wait (here: inserted but
// held before their acks, as a sink that stopped archiving would leave
// them), crawlhouse_sink_lag_messages counts them and
// crawlhouse_sink_lag_seconds, the age of the oldest, keeps growing; once
// the sink drains them both return to 0, and
// crawlhouse_sink_delivery_latency_seconds holds one observation per
// archived delivery.
func TestLagAgeAndDeliveryLatency(t *testing.T) {
	t.Parallel()
	const messages = 7
	e := setup(t)
	p := newPublisher(t, e["NATS_URL"])
	crawl := uuid.NewString()
	for i := range messages {
		p.publish(t, pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "page body"))
	}
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	s := startSink(t, e, sinkcmd.Options{WrapBatchWriter: wrapInsert(func() error { <-release; return nil })})
	t.Cleanup(unblock)
	metrics := "http://" + s.addr + "/metrics"
	scrape := func() string { _, m := httpGet(t, metrics); return m }

	waitFor(t, 2*time.Minute, "the lag counted", func() bool {
		return hasSample(scrape(), fmt.Sprintf("crawlhouse_sink_lag_messages %d", messages))
	})
	first := sampleValue(t, scrape(), "crawlhouse_sink_lag_seconds")
	if first <= 0 {
		t.Fatalf("crawlhouse_sink_lag_seconds = %v while %d deliveries wait", first, messages)
	}
	waitFor(t, 2*time.Minute, "the lag's age to grow", func() bool {
		return sampleValue(t, scrape(), "crawlhouse_sink_lag_seconds") > first
	})
	if m := scrape(); !hasSample(m, "crawlhouse_sink_delivery_latency_seconds_count 0") {
		t.Errorf("latency observed before any delivery was committed:\n%s", grepLines(m, "delivery_latency_seconds_count"))
	}

	unblock()
	waitFor(t, 2*time.Minute, "the lag drained", func() bool {
		m := scrape()
		return hasSample(m, "crawlhouse_sink_lag_messages 0") && hasSample(m, "crawlhouse_sink_lag_seconds 0")
	})
	m := scrape()
	if !hasSample(m, fmt.Sprintf("crawlhouse_sink_delivery_latency_seconds_count %d", messages)) {
		t.Errorf("want %d latency observations:\n%s", messages, grepLines(m, "delivery_latency_seconds"))
	}
	// The oldest delivery was taken by the publisher before JetStream stored
	// it, and committed after the release, which came after its age had
	// grown past first: its latency alone is more than first.
	if sum := sampleValue(t, m, "crawlhouse_sink_delivery_latency_seconds_sum"); sum <= first {
		t.Errorf("latency sum %v, want more than the lag age %v seen before the release", sum, first)
	}
	if !hasSample(m, "crawlhouse_sink_dead_letter_messages 0") {
		t.Errorf("dead-letter depth:\n%s", grepLines(m, "dead_letter"))
	}
}

// TestDeadLetterDepth: a message that can never be archived is
// dead-lettered, and crawlhouse_sink_dead_letter_messages counts it in the
// dead-letter stream (not only the crawlhouse_sink_dead_letters_total
// moves), until `sink redrive` empties the stream.
func TestDeadLetterDepth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := startSink(t, e, sinkcmd.Options{})
	metrics := "http://" + s.addr + "/metrics"
	waitFor(t, 2*time.Minute, "the depth exported at 0", func() bool {
		_, m := httpGet(t, metrics)
		return hasSample(m, "crawlhouse_sink_dead_letter_messages 0")
	})
	p := newPublisher(t, e["NATS_URL"])
	ctx := context.Background()
	// No Nats-Msg-Id, no envelope: nothing a retry could fix.
	if _, err := p.js.Publish(ctx, p.cfg.SubjectPrefix+".crawl.page", []byte("not a delivery")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "one dead letter", func() bool {
		_, m := httpGet(t, metrics)
		return hasSample(m, "crawlhouse_sink_dead_letter_messages 1") &&
			hasSample(m, "crawlhouse_sink_dead_letters_total 1") &&
			hasSample(m, "crawlhouse_sink_lag_messages 0")
	})
}

// sampleValue is the value of the unlabelled sample name in exposition.
func sampleValue(t *testing.T, exposition, name string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no sample %s in:\n%s", name, exposition)
	return 0
}

// grepLines is the lines of exposition that contain s (for failure messages).
func grepLines(exposition, s string) string {
	var out []string
	for line := range strings.SplitSeq(exposition, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
