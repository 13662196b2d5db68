package claim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// bucket is a claims bucket on a real JetStream server, as the sink makes
// the change summaries', with the connection to it.
func bucket(t *testing.T) (jetstream.KeyValue, *nats.Conn) {
	t.Helper()
	nc, js := streamtest.Connect(t, streamtest.Start(t))
	kv, err := stream.EnsureChangeClaims(context.Background(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	return kv, nc
}

// replica is one sink replica's claims on kv.
func replica(t *testing.T, kv jetstream.KeyValue) *claim.KVClaims {
	t.Helper()
	c, err := claim.NewKV(kv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// state reads key's claim as the bucket holds it.
func state(t *testing.T, kv jetstream.KeyValue, key string) (string, []string) {
	t.Helper()
	e, err := kv.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("claim of %s: %v", key, err)
	}
	var v struct {
		State     string   `json:"state"`
		Delivered []string `json:"delivered"`
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		t.Fatalf("claim of %s: %s: %v", key, e.Value(), err)
	}
	return v.State, v.Delivered
}

// TestClaimOnce: of two replicas claiming one key, one holds it and the
// other is told until when; once settled as sent nobody holds it again, a
// restarted replica included. A claim written before the states existed
// (a time) counts as sent.
func TestClaimOnce(t *testing.T) {
	t.Parallel()
	kv, _ := bucket(t)
	ctx := context.Background()
	one, two := replica(t, kv), replica(t, kv)

	held, err := one.Claim(ctx, "job-1")
	if err != nil || !held.Held {
		t.Fatalf("first claim: %+v, %v; want held", held, err)
	}
	busy, err := two.Claim(ctx, "job-1")
	if err != nil || busy.Held || busy.Until.IsZero() {
		t.Fatalf("second claim while held: %+v, %v; want not held, busy until the lease ends", busy, err)
	}
	if st, _ := state(t, kv, "job-1"); st != "sending" {
		t.Errorf("while held: %q, want sending", st)
	}
	if err := one.Settle(ctx, held, []string{"nats", "webhook"}, true); err != nil {
		t.Fatal(err)
	}
	if st, delivered := state(t, kv, "job-1"); st != "sent" || len(delivered) != 2 {
		t.Errorf("settled: %q to %v, want sent to both", st, delivered)
	}
	for _, c := range []*claim.KVClaims{one, two, replica(t, kv)} {
		if again, err := c.Claim(ctx, "job-1"); err != nil || again.Held || !again.Until.IsZero() {
			t.Errorf("claim once sent: %+v, %v; want not held, sent", again, err)
		}
	}

	if _, err := kv.Put(ctx, "job-old", []byte(`"2026-01-02T15:04:05Z"`)); err != nil {
		t.Fatal(err)
	}
	if old, err := two.Claim(ctx, "job-old"); err != nil || old.Held || !old.Until.IsZero() {
		t.Errorf("claim of an old value: %+v, %v; want sent", old, err)
	}
}

// TestLeaseTakenOver: a holder that never settles (a sink killed while
// sending) keeps the claim for Lease; then one other replica takes it
// over, with what the released deliveries reached.
func TestLeaseTakenOver(t *testing.T) {
	t.Parallel()
	kv, _ := bucket(t)
	ctx := context.Background()
	killed, later, other := replica(t, kv), replica(t, kv), replica(t, kv)
	start := time.Now()

	first, err := killed.Claim(ctx, "job-1")
	if err != nil || !first.Held {
		t.Fatalf("first claim: %+v, %v", first, err)
	}
	if err := killed.Settle(ctx, first, []string{"webhook"}, false); err != nil {
		t.Fatal(err)
	}
	retry, err := killed.Claim(ctx, "job-1")
	if err != nil || !retry.Held || len(retry.Delivered) != 1 || retry.Delivered[0] != "webhook" {
		t.Fatalf("claim of a released key: %+v, %v; want held, the webhook delivered", retry, err)
	}
	// killed stops here, holding the claim.
	later.SetClock(func() time.Time { return start.Add(claim.Lease / 2) })
	if c, err := later.Claim(ctx, "job-1"); err != nil || c.Held {
		t.Fatalf("claim within the lease: %+v, %v; want not held", c, err)
	}
	later.SetClock(func() time.Time { return start.Add(claim.Lease + time.Second) })
	other.SetClock(func() time.Time { return start.Add(claim.Lease + time.Second) })
	took, err := later.Claim(ctx, "job-1")
	if err != nil || !took.Held || len(took.Delivered) != 1 || took.Delivered[0] != "webhook" {
		t.Fatalf("claim after the lease: %+v, %v; want held, the webhook delivered", took, err)
	}
	if c, err := other.Claim(ctx, "job-1"); err != nil || c.Held {
		t.Errorf("a second take-over: %+v, %v; want not held", c, err)
	}
}

// hook is a webhook that counts the bodies it took.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.bodies = append(h.bodies, string(b))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bodies)
}

// TestSendDeliversTheRest: a notification whose publish fails (the
// replica's NATS connection cut) while its POST succeeds is released with
// the webhook delivered; the next Send, once NATS is back, publishes it
// and does not POST it again; a Send after that delivers nothing.
func TestSendDeliversTheRest(t *testing.T) {
	t.Parallel()
	kv, nc := bucket(t)
	h := newHook(t)
	sub, err := nc.SubscribeSync("crawl.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pub, p := streamtest.ConnectThrough(t, nc.ConnectedUrl())
	p.Cut()
	for deadline := time.Now().Add(time.Minute); pub.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection did not drop")
		}
	}
	claims := replica(t, kv)
	ch := claim.Channel{Name: "test", Subject: "crawl.test", WebhookURL: h.URL, Pub: pub, RetryDelay: time.Millisecond}
	ctx := context.Background()
	body := []byte(`{"text":"job-1"}`)

	sent, err := ch.Send(ctx, claims, "job-1", body, zerolog.Nop())
	if err == nil || sent.Now {
		t.Fatalf("Send with NATS cut: %+v, %v; want an error", sent, err)
	}
	if st, delivered := state(t, kv, "job-1"); st != "released" || len(delivered) != 1 || delivered[0] != "webhook" || h.count() != 1 {
		t.Fatalf("after the failed publish: %q to %v, %d POSTs; want released, the webhook's one", st, delivered, h.count())
	}
	p.Mend()
	for deadline := time.Now().Add(time.Minute); !pub.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no reconnection")
		}
	}
	if sent, err := ch.Send(ctx, claims, "job-1", body, zerolog.Nop()); err != nil || !sent.Now {
		t.Fatalf("Send once NATS is back: %+v, %v; want sent now", sent, err)
	}
	if sent, err := ch.Send(ctx, claims, "job-1", body, zerolog.Nop()); err != nil || sent.Now || !sent.Busy.IsZero() {
		t.Fatalf("Send once sent: %+v, %v; want nothing done", sent, err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil || string(m.Data) != string(body) {
		t.Fatalf("published: %v, %v; want the body", m, err)
	}
	if extra, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("published twice: %s", extra.Data)
	}
	if st, _ := state(t, kv, "job-1"); st != "sent" || h.count() != 1 {
		t.Errorf("at the end: %q, %d POSTs; want sent, one POST", st, h.count())
	}
}

// TestCheckWebhookURL: a webhook URL that could not work is named by its
// variable, never by its value (it often holds a secret).
func TestCheckWebhookURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{"": true, "https://hooks.example/T0/secret": true, "http://x:8080/p": true,
		"ftp://x/secret": false, "https:///secret": false, "secret": false} {
		err := claim.CheckWebhookURL("X_WEBHOOK_URL", raw)
		if (err == nil) != ok {
			t.Errorf("%q: %v", raw, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "X_WEBHOOK_URL") || strings.Contains(err.Error(), "secret")) {
			t.Errorf("%q: %v; want the variable named, the URL not", raw, err)
		}
	}
}
