package sinkcmd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// TestDeadLetterKeepsLargeBody: a delivery whose body is in the events
// stream's object store is dead-lettered; its original object then expires
// (deleted here). The dead letter kept a copy: `sink redrive` puts it back
// and the sink archives the page with the exact body; the dead letter's
// copy is gone once redriven.
func TestDeadLetterKeepsLargeBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e["SINK_MAX_DELIVER"] = "1"
	s := startSink(t, e, sinkcmd.Options{})
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "ready", func() bool { c, _ := httpGet(t, "http://"+s.addr+"/readyz"); return c == 200 })
	ctx := context.Background()
	if err := conn.Exec(ctx, "ALTER TABLE pages ADD CONSTRAINT no_big CHECK url != 'https://site.test/big'"); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, e["NATS_URL"])
	crawl, big := uuid.NewString(), uuid.NewString()
	markdown := largeMarkdown(t, 3<<20)
	p.publish(t, pageBody(crawl, big, "https://site.test/big", markdown))
	bodies, err := p.js.ObjectStore(ctx, "CRAWL_EVENTS_BODIES")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bodies.GetInfo(ctx, big); err != nil {
		t.Fatalf("the delivery was not stored aside: %v", err)
	}

	dl := onlyDeadLetter(t, p.js)
	if !strings.Contains(dl.Header.Get(delivery.HeaderDLQReason), "no_big") || dl.Header.Get(delivery.HeaderDLQBodyMissing) != "" {
		t.Errorf("dead letter headers: %v", dl.Header)
	}
	ref := dl.Header.Get("Crawlhouse-Body-Ref")
	dlqBodies, err := p.js.ObjectStore(ctx, "CRAWL_DLQ_BODIES")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dlqBodies.GetInfo(ctx, ref); err != nil {
		t.Fatalf("the dead letter's body %q is not in CRAWL_DLQ_BODIES: %v", ref, err)
	}
	// The sink logs a dead letter once it is published: wait for the line.
	waitFor(t, 30*time.Second, "the dead letter logged with its webhook id", func() bool {
		return strings.Contains(s.logs.String(), `"webhook_id":"`+big+`"`)
	})
	// The events stream's copy expires with NATS_MAX_AGE.
	if err := bodies.Delete(ctx, big); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "ALTER TABLE pages DROP CONSTRAINT no_big"); err != nil {
		t.Fatal(err)
	}
	out := &logtest.Buffer{}
	if err := sinkcmd.Run(ctx, []string{"sink", "redrive"}, e.get, out, out); err != nil {
		t.Fatalf("redrive: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "redriven 1 dead letter(s)") {
		t.Errorf("redrive printed %q", out.String())
	}
	waitFor(t, 60*time.Second, "the redriven page", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ? AND toString(webhook_id) = ?", crawl, big) == 1
	})
	var got string
	if err := conn.QueryRow(ctx, "SELECT markdown FROM pages FINAL WHERE toString(webhook_id) = ?", big).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != markdown {
		t.Errorf("the redriven page's markdown has %d bytes, not the %d delivered", len(got), len(markdown))
	}
	if _, err := dlqBodies.GetInfo(ctx, ref); err == nil {
		t.Errorf("the dead letter's body copy outlived the redrive")
	}
	st, _ := p.js.Stream(ctx, "CRAWL_DLQ")
	if info, _ := st.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("dead-letter stream still holds %d messages", info.State.Msgs)
	}
}

// TestDeadLetterOfLostBody: a delivery whose stored-aside body is already
// gone is dead-lettered at once, marked as such and logged; redrive cannot
// bring it back, so it leaves it in place and says so.
func TestDeadLetterOfLostBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := newPublisher(t, e["NATS_URL"])
	ctx := context.Background()
	lost := uuid.NewString()
	p.publish(t, pageBody(uuid.NewString(), lost, "https://site.test/lost", largeMarkdown(t, 2<<20)))
	bodies, err := p.js.ObjectStore(ctx, "CRAWL_EVENTS_BODIES")
	if err != nil {
		t.Fatal(err)
	}
	if err := bodies.Delete(ctx, lost); err != nil {
		t.Fatal(err)
	}
	s := startSink(t, e, sinkcmd.Options{})
	dl := onlyDeadLetter(t, p.js)
	if dl.Header.Get(delivery.HeaderDLQBodyMissing) == "" || dl.Header.Get(delivery.HeaderDLQMsgID) != lost {
		t.Errorf("dead letter headers: %v", dl.Header)
	}
	waitFor(t, 2*time.Minute, "the dead letter logged", func() bool {
		return strings.Contains(s.logs.String(), `"webhook_id":"`+lost+`"`) && strings.Contains(s.logs.String(), "object not found")
	})
	out := &logtest.Buffer{}
	err = sinkcmd.Run(ctx, []string{"sink", "redrive"}, e.get, out, out)
	if err == nil || !strings.Contains(err.Error(), "1 dead letter(s) kept") {
		t.Errorf("redrive: %v", err)
	}
	if !strings.Contains(out.String(), "redriven 0 dead letter(s)") {
		t.Errorf("redrive printed %q", out.String())
	}
	onlyDeadLetter(t, p.js)
}
