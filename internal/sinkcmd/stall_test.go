package sinkcmd_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// largeMarkdown is n bytes of text that zstd cannot shrink, so that its
// delivery goes to the object store.
func largeMarkdown(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n*3/4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// onlyDeadLetter waits for the dead-letter stream to hold exactly one
// message and returns it.
func onlyDeadLetter(t *testing.T, js jetstream.JetStream) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	var dl *jetstream.RawStreamMsg
	waitFor(t, 60*time.Second, "a dead letter", func() bool {
		st, err := js.Stream(ctx, "CRAWL_DLQ")
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		if err != nil || info.State.Msgs != 1 {
			return false
		}
		dl, err = st.GetMsg(ctx, info.State.FirstSeq)
		return err == nil
	})
	return dl
}

// TestPageTooLargeForClickHouse: one page of a batch fails on the server
// with MEMORY_LIMIT_EXCEEDED (a "try later" error) every time while
// ClickHouse answers. The sink reports the stall (metric, /readyz 503 with
// the reason) while it holds the batch, then isolates the page, archives
// every other page, dead-letters the page with the reason after
// SINK_MAX_DELIVER deliveries, and is ready again.
func TestPageTooLargeForClickHouse(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e["SINK_MAX_DELIVER"] = "3"
	p := newPublisher(t, e["NATS_URL"])
	crawl := uuid.NewString()
	for i := range 10 {
		p.publish(t, pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "small"))
	}
	big := uuid.NewString()
	p.publish(t, pageBody(crawl, big, "https://site.test/big", largeMarkdown(t, 2<<20)))
	for i := 10; i < 20; i++ {
		p.publish(t, pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "small"))
	}

	// 30 MB is plenty for an insert of small pages and too little for the
	// 2 MB one (its markdown is also in the document column).
	s := startSink(t, e, sinkcmd.Options{ClickHouseSettings: map[string]any{"max_memory_usage": 30_000_000}})
	base := "http://" + s.addr
	waitFor(t, 60*time.Second, "the stall reported", func() bool {
		code, body := httpGet(t, base+"/readyz")
		_, m := httpGet(t, base+"/metrics")
		return code == 503 && strings.Contains(body, `"consumer":"stalled for`) && strings.Contains(body, "code: 241") &&
			strings.Contains(body, `"clickhouse":"ok"`) && hasSample(m, "crawlhouse_sink_stalled 1")
	})

	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 60*time.Second, "every other page", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ? AND url != 'https://site.test/big'", crawl) == 20
	})
	dl := onlyDeadLetter(t, p.js)
	if r := dl.Header.Get(delivery.HeaderDLQReason); !strings.Contains(r, "code: 241") || !strings.Contains(r, "while ClickHouse answers") {
		t.Errorf("dead letter reason %q", r)
	}
	if dl.Header.Get(delivery.HeaderDLQMsgID) != big || dl.Header.Get(delivery.HeaderDLQDeliveries) != "3" {
		t.Errorf("dead letter headers: %v", dl.Header)
	}
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM pages WHERE url = 'https://site.test/big'"); n != 0 {
		t.Errorf("the big page is in ClickHouse %d times", n)
	}
	waitFor(t, 2*time.Minute, "ready again", func() bool {
		code, _ := httpGet(t, base+"/readyz")
		_, m := httpGet(t, base+"/metrics")
		return code == 200 && hasSample(m, "crawlhouse_sink_stalled 0") && hasSample(m, "crawlhouse_sink_stalled_seconds 0") &&
			hasSample(m, "crawlhouse_sink_dead_letters_total 1")
	})
	for _, want := range []string{`"message":"message dead-lettered"`, `"webhook_id":"` + big + `"`, `"crawl_id":"` + crawl + `"`, "sink stalled", "sink no longer stalled"} {
		if !strings.Contains(s.logs.String(), want) {
			t.Errorf("logs lack %s", want)
		}
	}
}
