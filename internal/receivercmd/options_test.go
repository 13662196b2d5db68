package receivercmd

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
)

// recordingPublisher keeps what it is given and answers as told.
type recordingPublisher struct {
	mu   sync.Mutex
	got  []delivery.Envelope
	ack  stream.Ack
	fail bool
}

func (p *recordingPublisher) Publish(_ context.Context, env *delivery.Envelope) (stream.Ack, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, *env)
	if p.fail {
		return stream.Ack{}, fmt.Errorf("%w: test outage", stream.ErrUnavailable)
	}
	return p.ack, nil
}

// TestOptionsPublisher: a Publisher passed in Options takes every checked
// delivery in JetStream's place (the load generator's HTTP floor relies on
// it), and its answer decides the HTTP one: accepted, duplicate, 503.
func TestOptionsPublisher(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	pub := &recordingPublisher{ack: stream.Ack{Sequence: 7}}
	r := startReceiverWith(t, map[string]string{"NATS_URL": js.URL()}, Options{Publisher: pub})

	body, id := page(t, "# floor")
	if a := r.deliver(t, body); a.status != 200 || a.body != `{"status":"accepted","webhookId":"`+id+`"}` {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	pub.mu.Lock()
	if len(pub.got) != 1 || pub.got[0].WebhookID != id || string(pub.got[0].Body) != string(body) ||
		pub.got[0].Subject != "crawl.events.crawl.page" {
		t.Fatalf("publisher got %+v", pub.got)
	}
	pub.ack.Duplicate = true
	pub.mu.Unlock()
	if a := r.deliver(t, body); a.status != 200 || a.body != `{"status":"duplicate","webhookId":"`+id+`"}` {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	pub.mu.Lock()
	pub.fail = true
	pub.mu.Unlock()
	if a := r.deliver(t, body); a.status != 503 || a.header.Get("Retry-After") == "" {
		t.Fatalf("answer %d %s, Retry-After %q", a.status, a.body, a.header.Get("Retry-After"))
	}
	// A delivery refused before publishing never reaches the publisher.
	if a := r.post(t, body, "X-Service-Signature", "sha256="+fmt.Sprintf("%064x", 0)); a.status != 401 {
		t.Fatalf("bad signature answered %d", a.status)
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if len(pub.got) != 3 {
		t.Fatalf("publisher got %d deliveries, want 3", len(pub.got))
	}
	if n := streamMsgs(t, js.client(t)); n != 0 {
		t.Fatalf("stream has %d messages; the publisher in Options should have taken them all", n)
	}
}
