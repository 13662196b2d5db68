package sinkcmd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// TestSinkArchives runs the sink over the sender's fixtures and a crawl of
// pages, duplicates included, and checks the tables, the endpoints and the
// metrics.
func TestSinkArchives(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := newPublisher(t, e["NATS_URL"])
	for _, f := range []string{"crawl-page.json", "crawl-page-failed.json", "crawl-completed.json"} {
		p.publish(t, readFile(t, "../../testdata/fixtures/"+f))
	}
	crawl := uuid.NewString()
	for i := range 50 {
		body := pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "page body")
		p.publish(t, body)
		if i%10 == 0 && !p.publish(t, body) { // the sender's retry
			t.Fatal("a retried delivery was not a JetStream duplicate")
		}
	}
	s := startSink(t, e, sinkcmd.Options{})
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "every delivery", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl) == 50 &&
			clickhousetest.TryCount(conn, "SELECT count() FROM crawl_events") == 1
	})
	// The batch is acked and counted just after its last insert returns.
	waitFor(t, 2*time.Minute, "the metrics", func() bool {
		_, m := httpGet(t, "http://"+s.addr+"/metrics")
		return hasSample(m, `crawlhouse_sink_rows_inserted_total{table="crawl_events"} 1`)
	})
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM pages FINAL"); n != 52 {
		t.Errorf("pages: %d, want 52", n)
	}
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM failures FINAL"); n != 1 {
		t.Errorf("failures: %d, want 1", n)
	}
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl_events FINAL WHERE type = 'crawl.completed'"); n != 1 {
		t.Errorf("crawl_events: %d, want 1", n)
	}
	if n := clickhousetest.Count(t, conn, "SELECT pages_received FROM crawls WHERE crawl_id = ?", crawl); n != 50 {
		t.Errorf("crawls.pages_received: %d, want 50", n)
	}

	if code, body := httpGet(t, "http://"+s.addr+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := httpGet(t, "http://"+s.addr+"/readyz"); code != 200 || !strings.Contains(body, `"clickhouse":"ok"`) || !strings.Contains(body, `"jetstream":"ok"`) {
		t.Errorf("/readyz: %d %s", code, body)
	}
	_, metrics := httpGet(t, "http://"+s.addr+"/metrics")
	for _, want := range []string{
		`crawlhouse_sink_rows_inserted_total{table="pages"} 52`,
		`crawlhouse_sink_rows_inserted_total{table="failures"} 1`,
		"crawlhouse_page_failures_total 1",
		"crawlhouse_sink_dead_letters_total 0",
		"crawlhouse_alerts_total 0",
		"crawlhouse_sink_naks_total 0",
		// Everything was published before the sink started: the last
		// message fetched had nothing behind it.
		"crawlhouse_sink_consumer_pending 0",
	} {
		if !hasSample(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, want := range []string{"crawlhouse_sink_insert_seconds_count ", "crawlhouse_sink_batches_total "} {
		if !strings.Contains(metrics, "\n"+want) || strings.Contains(metrics, "\n"+want+"0\n") {
			t.Errorf("/metrics: %s missing or 0", want)
		}
	}
}

// TestDeadLetterAndRedrive: a message ClickHouse rejects is tried
// SINK_MAX_DELIVER times, moved to the dead-letter stream with the reason,
// and archived after `sink redrive` once the cause is gone.
func TestDeadLetterAndRedrive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e["SINK_MAX_DELIVER"] = "2"
	s := startSink(t, e, sinkcmd.Options{})
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "ready", func() bool { c, _ := httpGet(t, "http://"+s.addr+"/readyz"); return c == 200 })
	// A constraint stands in for any data ClickHouse refuses.
	ctx := context.Background()
	if err := conn.Exec(ctx, "ALTER TABLE pages ADD CONSTRAINT no_poison CHECK title != 'T https://site.test/poison'"); err != nil {
		t.Fatal(err)
	}
	crawl := uuid.NewString()
	p := newPublisher(t, e["NATS_URL"])
	p.publish(t, pageBody(crawl, uuid.NewString(), "https://site.test/good", "fine"))
	poison := uuid.NewString()
	p.publish(t, pageBody(crawl, poison, "https://site.test/poison", "refused"))

	waitFor(t, 2*time.Minute, "the good page", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE url = 'https://site.test/good'") == 1
	})
	js := p.js
	waitFor(t, 2*time.Minute, "a dead letter", func() bool {
		st, err := js.Stream(ctx, "CRAWL_DLQ")
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	st, _ := js.Stream(ctx, "CRAWL_DLQ")
	info, _ := st.Info(ctx)
	dl, err := st.GetMsg(ctx, info.State.FirstSeq)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dl.Header.Get(delivery.HeaderDLQReason), "no_poison") || dl.Header.Get(delivery.HeaderDLQDeliveries) != "2" ||
		dl.Header.Get(delivery.HeaderDLQMsgID) != poison || dl.Header.Get(delivery.HeaderDLQSubject) != "crawl.events.crawl.page" {
		t.Errorf("dead letter headers: %v", dl.Header)
	}
	_, metrics := httpGet(t, "http://"+s.addr+"/metrics")
	if !hasSample(metrics, "crawlhouse_sink_dead_letters_total 1") {
		t.Errorf("metrics: dead letters not counted")
	}

	if err := conn.Exec(ctx, "ALTER TABLE pages DROP CONSTRAINT no_poison"); err != nil {
		t.Fatal(err)
	}
	// NATS's closed callback may still log after Run returns.
	out := &logtest.Buffer{}
	if err := sinkcmd.Run(ctx, []string{"sink", "redrive"}, e.get, out, out); err != nil {
		t.Fatalf("redrive: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "redriven 1 dead letter(s)") {
		t.Errorf("redrive printed %q", out.String())
	}
	waitFor(t, 2*time.Minute, "the redriven page", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE url = 'https://site.test/poison' AND toString(webhook_id) = ?", poison) == 1
	})
	info, _ = st.Info(ctx)
	if info.State.Msgs != 0 {
		t.Errorf("dead-letter stream still holds %d messages", info.State.Msgs)
	}
}

// TestUndecodableDeadLettered: a message that can never be decoded goes to
// the dead-letter stream at once, without retries, and the rest flows.
func TestUndecodableDeadLettered(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := newPublisher(t, e["NATS_URL"])
	ctx := context.Background()
	bad := nats.NewMsg("crawl.events.crawl.page")
	bad.Header.Set("Nats-Msg-Id", uuid.NewString())
	bad.Data = []byte(`{"success":true,"type":"crawl.page","id":"not-a-uuid"}`)
	if _, err := p.js.PublishMsg(ctx, bad); err != nil {
		t.Fatal(err)
	}
	crawl := uuid.NewString()
	p.publish(t, pageBody(crawl, uuid.NewString(), "https://site.test/ok", "ok"))
	startSink(t, e, sinkcmd.Options{})
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "the good page", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl) == 1
	})
	waitFor(t, 2*time.Minute, "a dead letter", func() bool {
		st, err := p.js.Stream(ctx, "CRAWL_DLQ")
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	st, _ := p.js.Stream(ctx, "CRAWL_DLQ")
	info, _ := st.Info(ctx)
	dl, _ := st.GetMsg(ctx, info.State.FirstSeq)
	if r := dl.Header.Get(delivery.HeaderDLQReason); !strings.Contains(r, "id") || dl.Header.Get(delivery.HeaderDLQDeliveries) != "1" {
		t.Errorf("dead letter: reason %q, deliveries %s", r, dl.Header.Get(delivery.HeaderDLQDeliveries))
	}
}

// TestCrashBetweenInsertAndAck is the at-least-once conformance case: a sink
// dies after ClickHouse committed a batch and before it acked (the insert's
// answer never reaches it before it is stopped). Another sink gets the
// batch again; FINAL shows every page once.
func TestCrashBetweenInsertAndAck(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e["SINK_BATCH_SIZE"] = "40"
	p := newPublisher(t, e["NATS_URL"])
	crawl := uuid.NewString()
	const pages = 200
	for i := range pages {
		p.publish(t, pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "x"))
	}
	var crashed atomic.Bool
	died := make(chan struct{})
	var dieOnce sync.Once
	die := func() { dieOnce.Do(func() { close(died) }) }
	first := startSink(t, e, sinkcmd.Options{AckWait: time.Second, WrapBatchWriter: wrapInsert(func() error {
		if !crashed.CompareAndSwap(false, true) {
			return nil
		}
		<-died
		return errors.New("the sink died before its acks")
	})})
	t.Cleanup(die) // runs before the sink's stop
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "the crash", crashed.Load)
	// Stopped first, the sink hands the batch whose insert it saw fail back
	// unacked, as a sink that died would leave it.
	first.cancel()
	die()
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	second := startSink(t, e, sinkcmd.Options{AckWait: time.Second})
	waitFor(t, 60*time.Second, "every page", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl) == pages
	})
	if n := clickhousetest.Count(t, conn, "SELECT count(DISTINCT url) FROM pages WHERE crawl_id = ?", crawl); n != pages {
		t.Errorf("distinct urls %d, want %d", n, pages)
	}
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM (SELECT url FROM pages FINAL WHERE crawl_id = ? GROUP BY url HAVING count() > 1)", crawl); n != 0 {
		t.Errorf("%d pages twice under FINAL", n)
	}
	// The statistics are written by a materialized view within the same
	// INSERT, but committed after the pages' part: a reader can see the last
	// batch's pages a moment before its counts (the load of a busy machine
	// makes that moment long). They must get there.
	waitFor(t, 60*time.Second, "crawls.pages_received to count every page", func() bool {
		return clickhousetest.TryCount(conn, "SELECT pages_received FROM crawls WHERE crawl_id = ?", crawl) == pages
	})
	// The abandoned batch was really delivered and inserted again.
	_, m1 := httpGet(t, "http://"+second.addr+"/metrics")
	_ = m1
	if raw := clickhousetest.Count(t, conn, "SELECT count() FROM pages WHERE crawl_id = ?", crawl); raw < pages {
		t.Errorf("raw rows %d < %d", raw, pages)
	}
}
