package e2e_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// TestQuarantinedDeliveriesArchivedOnce: the crawl API signs with a new
// secret the receiver does not have yet. Its deliveries are refused 401,
// nothing of them reaches the archive; once the operator adds the secret,
// `receiver redrive-rejected` (run twice) makes the real sink archive each
// page exactly once.
func TestQuarantinedDeliveriesArchivedOnce(t *testing.T) {
	t.Parallel()
	const rotated = "rotated-secret"
	p := newPipeline(t, "")
	url := p.startReceiver(t, nil)
	p.startSink(t, nil)

	crawl := uuid.NewString()
	for i := 0; i < 3; i++ {
		body := pageBody(crawl, uuid.NewString(), "https://site.test/rotated/"+uuid.NewString(), "rotated")
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set(verify.FirecrawlHeader, verify.Header(rotated, body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("rotated delivery answered %d, want 401", resp.StatusCode)
		}
	}
	nc, err := nats.Connect(p.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstreamNew(nc)
	ctx := context.Background()
	waitFor(t, time.Minute, "three quarantined deliveries", func() bool {
		st, err := js.Stream(ctx, "CRAWL_REJECTED_UNVERIFIED")
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 3
	})

	redrive := func() string {
		env := env{"NATS_URL": p.natsURL, "WEBHOOK_SECRETS": secret + "," + rotated, "LOG_LEVEL": "warn"}
		var out strings.Builder
		if err := receivercmd.Run(ctx, []string{"receiver", "redrive-rejected"}, env.get, &out, &out); err != nil {
			t.Fatalf("redrive-rejected: %v\n%s", err, out.String())
		}
		return out.String()
	}
	if out := redrive(); !strings.Contains(out, "archived 3 (of which 0 already stored)") {
		t.Fatalf("first redrive: %s", out)
	}
	if out := redrive(); !strings.Contains(out, "examined 0, archived 0") {
		t.Fatalf("second redrive: %s", out)
	}
	// A delivery sent after both redrives: once it is archived, whatever
	// they published before it has been too (one consumer, in order).
	marker := uuid.NewString()
	mustDeliver(t, url, pageBody(marker, uuid.NewString(), "https://site.test/marker", "marker"))
	waitFor(t, 2*time.Minute, "the marker page", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM pages WHERE crawl_id = ?", marker) == 1
	})
	if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM pages WHERE crawl_id = ?", crawl); n != 3 {
		t.Errorf("%d rows of the rotated crawl, want 3 (each archived once, not even merged duplicates)", n)
	}
}
