package receivercmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/nats-io/nats.go/jetstream"
)

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestEndpoints: health, readiness, metrics and unknown routes.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL()})
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/healthz", 200, `{"status":"ok"}`},
		{"GET", "/readyz", 200, `{"status":"ready","checks":{"jetstream":"ok"}}`},
		{"GET", "/nope", 404, `{"error":"not_found","message":"Not Found"}`},
		{"GET", "/webhooks/crawl", 405, `{"error":"method_not_allowed","message":"Method Not Allowed"}`},
	} {
		a := do(t, mustRequest(t, tc.method, r.URL+tc.path))
		if a.status != tc.status || a.body != tc.body {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, a.status, a.body, tc.status, tc.body)
		}
	}
	a := do(t, mustRequest(t, "GET", r.URL+"/metrics"))
	for _, name := range []string{"crawlhouse_webhook_deliveries_total", "crawlhouse_webhook_publish_seconds_bucket"} {
		if a.status != 200 || !strings.Contains(a.body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestAllowUnsigned: with WEBHOOK_ALLOW_UNSIGNED=true and no secret, an
// unsigned delivery is accepted.
func TestAllowUnsigned(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "WEBHOOK_SECRETS": "", "WEBHOOK_ALLOW_UNSIGNED": "true"})
	body, _ := page(t, "x")
	if a := r.post(t, body, "", ""); a.status != 200 {
		t.Fatalf("unsigned: %d %s", a.status, a.body)
	}
	if !strings.Contains(r.logs.String(), "WEBHOOK_ALLOW_UNSIGNED=true") {
		t.Error("no warning logged")
	}
}

// TestLargeBody: a 5 MB incompressible delivery is accepted, stored aside in
// the object store, and read back intact through delivery.Bodies; a 3 MB
// compressible one travels compressed in the message.
func TestLargeBody(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, true)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL()})
	client := js.client(t)
	for _, tc := range []struct {
		name     string
		markdown string
		stored   func(*delivery.Envelope) bool
	}{
		{"5MB random", randomText(5 << 20), func(e *delivery.Envelope) bool { return e.BodyRef != "" && len(e.Body) == 0 }},
		{"3MB text", strings.Repeat("All work and no play makes Jack a dull boy. ", 3<<20/44), func(e *delivery.Envelope) bool {
			return e.BodyRef == "" && e.Encoding == delivery.EncodingZstd
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, id := page(t, tc.markdown)
			if a := r.deliver(t, body); a.status != 200 || !strings.Contains(a.body, `"accepted"`) {
				t.Fatalf("%d %s", a.status, a.body)
			}
			if a := r.deliver(t, body); a.status != 200 || !strings.Contains(a.body, `"duplicate"`) {
				t.Fatalf("retry: %d %s", a.status, a.body)
			}
			msg := lastMsg(t, client, "crawl.events.crawl.page")
			env, err := delivery.Decode(msg.Subject, msg.Header, msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			if env.WebhookID != id || !tc.stored(env) {
				t.Fatalf("envelope %s ref=%q enc=%q body=%d bytes", env.WebhookID, env.BodyRef, env.Encoding, len(env.Body))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := delivery.NewBodies(client, stream.Config{Stream: "CRAWL_EVENTS"}.BodyBucket()).Open(ctx, env)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("body read back differs: %d bytes, want %d", len(got), len(body))
			}
			if env.Size != len(body) {
				t.Errorf("size header %d, want %d", env.Size, len(body))
			}
		})
	}
}

// TestJetStreamDown: with JetStream stopped, deliveries get 503 with
// Retry-After and nothing is stored; once it is back (same store), the same
// receiver accepts them again.
func TestJetStreamDown(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, true)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "RECEIVER_PUBLISH_TIMEOUT": "1s"})
	before, _ := page(t, "before")
	if a := r.deliver(t, before); a.status != 200 {
		t.Fatalf("before: %d %s", a.status, a.body)
	}

	js.stop()
	during, id := page(t, "during")
	a := r.deliver(t, during)
	if a.status != 503 || a.body != `{"error":"unavailable","message":"JetStream did not confirm the delivery in time; retry later"}` {
		t.Fatalf("down: %d %s", a.status, a.body)
	}
	if a.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if a := do(t, mustRequest(t, "GET", r.URL+"/readyz")); a.status != 503 {
		t.Errorf("readyz while down: %d", a.status)
	}

	js.start(true)
	client := js.client(t)
	if n := streamMsgs(t, client); n != 1 {
		t.Fatalf("after restart the stream holds %d messages, want 1: the refused delivery was stored", n)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		a := r.deliver(t, during)
		if a.status == 200 {
			if a.body != `{"status":"accepted","webhookId":"`+id+`"}` {
				t.Fatalf("after restart: %s", a.body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not accepted 15s after JetStream restarted: %d %s", a.status, a.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := streamMsgs(t, client); n != 2 {
		t.Errorf("stream holds %d messages, want 2", n)
	}
}

// slowDelivery starts a delivery whose body arrives in two parts; it is in
// progress (holding an in-flight slot) until finish is called.
type slowDelivery struct {
	w      *io.PipeWriter
	rest   []byte
	answer chan answer
}

func startSlowDelivery(t *testing.T, r *runningReceiver, body []byte) *slowDelivery {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, r.URL+"/webhooks/crawl", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	req.Header.Set(verify.DefaultHeader, verify.Header(testSecret, body))
	d := &slowDelivery{w: pw, rest: body[10:], answer: make(chan answer, 1)}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			d.answer <- answer{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		d.answer <- answer{resp.StatusCode, resp.Header, strings.TrimSpace(string(b))}
	}()
	if _, err := pw.Write(body[:10]); err != nil {
		t.Fatal(err)
	}
	waitUnverified(t, r, 1)
	return d
}

func (d *slowDelivery) finish(t *testing.T) answer {
	t.Helper()
	if _, err := d.w.Write(d.rest); err != nil {
		t.Fatal(err)
	}
	d.w.Close()
	select {
	case a := <-d.answer:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10s")
		return answer{}
	}
}

func waitUnverified(t *testing.T, r *runningReceiver, n int) {
	t.Helper()
	waitMetric(t, r, "crawlhouse_webhook_unverified", fmt.Sprint(n), func(v float64) bool { return v == float64(n) })
}

// TestOverloaded: beyond RECEIVER_MAX_INFLIGHT verified deliveries being
// stored, the next one gets 429 with Retry-After. Beyond
// RECEIVER_MAX_UNVERIFIED bodies being read from senders not trusted yet,
// the slowest of them gets it instead (outcome evicted), and the newcomer
// is served.
func TestOverloaded(t *testing.T) {
	t.Parallel()
	const want = `{"error":"overloaded","message":"too many deliveries or body bytes in progress; retry later"}`
	t.Run("stored", func(t *testing.T) {
		t.Parallel()
		js := startJetStream(t, false)
		pub := &heldPublisher{entered: make(chan struct{}, 1), release: make(chan struct{})}
		r := startReceiverWith(t, map[string]string{"NATS_URL": js.URL(), "RECEIVER_MAX_INFLIGHT": "1", "RECEIVER_PUBLISH_TIMEOUT": "9s"}, Options{Publisher: pub})
		first, _ := page(t, "first")
		answered := make(chan answer, 1)
		go func() { answered <- r.deliver(t, first) }()
		<-pub.entered // the first holds the only slot, in its publish
		second, _ := page(t, "second")
		a := r.deliver(t, second)
		if a.status != 429 || a.body != want || a.header.Get("Retry-After") == "" {
			t.Fatalf("second: %d %s Retry-After=%q", a.status, a.body, a.header.Get("Retry-After"))
		}
		close(pub.release)
		if a := <-answered; a.status != 200 {
			t.Fatalf("first: %d %s", a.status, a.body)
		}
		if a := r.deliver(t, second); a.status != 200 {
			t.Fatalf("second again: %d %s", a.status, a.body)
		}
	})
	t.Run("unverified", func(t *testing.T) {
		t.Parallel()
		js := startJetStream(t, false)
		r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "RECEIVER_MAX_UNVERIFIED": "1", "RECEIVER_BODY_TIMEOUT": "1m"})
		first, _ := page(t, "first")
		slow := startSlowDelivery(t, r, first)
		// From another client, the pool full: the slow body is evicted
		// to make room, and answered 429 so that its sender retries.
		second, _ := page(t, "second")
		if a := sendFrom(t, "127.0.0.2", strings.TrimPrefix(r.URL, "http://"), rawRequest{body: second, sig: verify.Header(testSecret, second)}); a.status != 200 {
			t.Fatalf("second, the pool full of a slower body: %d %s, want 200", a.status, a.body)
		}
		var a answer
		select {
		case a = <-slow.answer:
		case <-time.After(time.Minute):
			t.Fatal("the evicted body was not answered")
		}
		if a.status != 429 || !strings.HasPrefix(a.body, `{"error":"overloaded","message":`) || a.header.Get("Retry-After") == "" {
			t.Fatalf("first, evicted: %d %s Retry-After=%q", a.status, a.body, a.header.Get("Retry-After"))
		}
		if got := outcomeCount(t, r, receiver.OutcomeEvicted); got != 1 {
			t.Errorf("outcome evicted counted %v, want 1", got)
		}
		if a := r.deliver(t, first); a.status != 200 {
			t.Fatalf("first again: %d %s", a.status, a.body)
		}
	})
}

// heldPublisher stores nothing: each Publish says it entered, then waits
// for release and acknowledges.
type heldPublisher struct {
	entered chan struct{}
	release chan struct{}
	seq     atomic.Uint64
}

func (p *heldPublisher) Publish(ctx context.Context, _ *delivery.Envelope) (stream.Ack, error) {
	select {
	case p.entered <- struct{}{}:
	default:
	}
	select {
	case <-p.release:
	case <-ctx.Done():
		return stream.Ack{}, ctx.Err()
	}
	return stream.Ack{Sequence: p.seq.Add(1)}, nil
}

// TestShutdownDrains: a delivery in progress when shutdown begins is
// finished and answered 200, and Run returns cleanly.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, true)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "RECEIVER_BODY_TIMEOUT": "1m"})
	body, id := page(t, "draining")
	slow := startSlowDelivery(t, r, body)

	stopped := make(chan error, 1)
	go func() { stopped <- r.stop(t) }()
	time.Sleep(200 * time.Millisecond) // shutdown has begun
	select {
	case err := <-stopped:
		t.Fatalf("Run returned with a delivery in progress: %v", err)
	default:
	}
	if a := slow.finish(t); a.status != 200 || a.body != `{"status":"accepted","webhookId":"`+id+`"}` {
		t.Fatalf("in-flight delivery: %d %s", a.status, a.body)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := streamMsgs(t, js.client(t)); n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
}

// TestEmbedded: NATS_EMBEDDED=true runs JetStream in process; Ready reports
// its URL.
func TestEmbedded(t *testing.T) {
	t.Parallel()
	r := startReceiver(t, map[string]string{
		"NATS_EMBEDDED": "true", "NATS_URL": "nats://127.0.0.1:-1", "NATS_STORE_DIR": t.TempDir(),
	})
	body, sig := fixture(t, "crawl-page.json")
	if a := r.post(t, body, verify.DefaultHeader, sig); a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if n := streamMsgs(t, (&jetStream{url: r.NATS}).client(t)); n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
}

// lastMsg is the last message on subject.
func lastMsg(t *testing.T, js jetstream.JetStream, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "CRAWL_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatalf("last message on %s: %v", subject, err)
	}
	return msg
}
