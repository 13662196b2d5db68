package sink

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// inFlightWriter is ClickHouse as several inserts at once see it: the
// first `together` inserts each wait until that many are in flight, and
// every insert holding the URL down fails as if ClickHouse were
// unreachable.
type inFlightWriter struct {
	together int
	down     string
	full     chan struct{}

	mu       sync.Mutex
	arrived  int
	active   int
	most     int // inserts in flight at once, at most
	archived []string
}

func newInFlightWriter(together int, down string) *inFlightWriter {
	return &inFlightWriter{together: together, down: down, full: make(chan struct{})}
}

func (w *inFlightWriter) Insert(ctx context.Context, rows archive.Rows) error {
	var urls []string
	for _, p := range rows.Pages {
		urls = append(urls, p.URL)
	}
	if slices.Contains(urls, w.down) {
		return fmt.Errorf("dial tcp 127.0.0.1:9000: %w", io.ErrUnexpectedEOF)
	}
	w.mu.Lock()
	w.arrived++
	w.active++
	w.most = max(w.most, w.active)
	if w.arrived == w.together {
		close(w.full)
	}
	first := w.arrived <= w.together
	w.mu.Unlock()
	if first {
		// Without inserts in flight together this never fills: the
		// insert goes on after a while and the test fails on w.most.
		select {
		case <-w.full:
		case <-time.After(20 * time.Second):
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.active--
	w.archived = append(w.archived, urls...)
	return nil
}

func (w *inFlightWriter) Ping(context.Context) error { return io.ErrUnexpectedEOF }

func (w *inFlightWriter) PriorFailures(_ context.Context, fs []archive.Failure) ([]archive.Prior, error) {
	return make([]archive.Prior, len(fs)), nil
}

func (w *inFlightWriter) state() (archived []string, most int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.archived), w.most
}

// recorder is an Observer keeping what it was told, in order.
type recorder struct {
	mu   sync.Mutex
	seen []Committed
}

func (r *recorder) Observe(c Committed) { r.mu.Lock(); defer r.mu.Unlock(); r.seen = append(r.seen, c) }

// TestInsertsInFlight runs the consumer over a real JetStream stream with
// three inserts in flight while one batch cannot be inserted: the others
// are inserted together and acked, the held one alone is handed back at
// shutdown and redelivered, nothing is inserted twice, and the observers
// learn of the committed deliveries in the order they were stored.
func TestInsertsInFlight(t *testing.T) {
	t.Parallel()
	const (
		batchSize = 5
		inFlight  = 3
		pages     = 40
	)
	url := streamtest.Start(t)
	nc, js := streamtest.Connect(t, url)
	// The fourth batch (pages 15 to 19) holds p17, which ClickHouse never
	// takes.
	w := newInFlightWriter(inFlight, "p17")
	c := testConsumer(t, js, w, 10, io.Discard)
	c.cfg.BatchSize, c.cfg.InsertsInFlight = batchSize, inFlight
	obs := &recorder{}
	c.observers = []Observer{obs}
	c.sleep = func(ctx context.Context, _ time.Duration) { sleep(ctx, 10*time.Millisecond) }

	eventsCfg := stream.Config{Stream: "CRAWL_EVENTS", SubjectPrefix: "crawl.events", DedupWindow: time.Minute, MaxAge: time.Hour, Replicas: 1}
	pub := stream.NewPublisher(nc, js, eventsCfg, stream.PublisherOptions{})
	defer pub.Close()
	urlOf := map[string]string{} // webhook id → URL
	start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for i := range pages {
		u, webhook := fmt.Sprintf("p%02d", i), uuid.NewString()
		body := fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":"m","metadata":{"sourceURL":%q,"statusCode":200}}]}`,
			uuid.NewString(), webhook, u)
		h, err := events.Validate(body)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pub.Publish(context.Background(), delivery.NewEnvelope(eventsCfg.SubjectPrefix, h, body, start.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
		urlOf[webhook] = u
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	// The first three batches go in together; the batches inserted with
	// the held one are committed; then nothing moves until the held one is.
	want := (2*inFlight - 1) * batchSize
	deadline := time.Now().Add(time.Minute)
	for {
		archived, _ := w.state()
		if len(archived) >= want && c.stall.Err() != nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("never %d pages archived beside a held batch: %v (stall: %v)", want, archived, c.stall.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done

	archived, most := w.state()
	if most < inFlight {
		t.Errorf("at most %d inserts in flight together, want %d", most, inFlight)
	}
	held := []string{"p15", "p16", "p17", "p18", "p19"}
	for _, u := range held {
		if slices.Contains(archived, u) {
			t.Errorf("%s of the held batch archived", u)
		}
	}
	sorted := slices.Sorted(slices.Values(archived))
	if len(slices.Compact(slices.Clone(sorted))) != len(sorted) {
		t.Errorf("a page inserted twice: %v", sorted)
	}
	if err := c.stall.Err(); err != nil {
		t.Errorf("still stalled after shutdown: %v", err)
	}

	// Observers: every committed delivery, once, in the order stored.
	if len(obs.seen) != len(archived) {
		t.Errorf("observers told of %d deliveries, %d were archived", len(obs.seen), len(archived))
	}
	if !slices.IsSortedFunc(obs.seen, func(a, b Committed) int { return a.ReceivedAt.Compare(b.ReceivedAt) }) {
		t.Errorf("observers told out of order: %v", obs.seen)
	}

	// What JetStream gives again: the held batch redelivered, the rest
	// never delivered; nothing acked is redelivered.
	var redelivered, fresh []string
	for {
		b, err := c.src.Fetch(pages, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			u := urlOf[delivery.WebhookID(m.Headers())]
			if md.NumDelivered > 1 {
				redelivered = append(redelivered, u)
			} else {
				fresh = append(fresh, u)
			}
		}
		if n == 0 {
			break
		}
	}
	slices.Sort(redelivered)
	if !slices.Equal(redelivered, held) {
		t.Errorf("redelivered %v, want the held batch %v", redelivered, held)
	}
	all := slices.Concat(archived, redelivered, fresh)
	slices.Sort(all)
	if len(all) != pages || len(slices.Compact(all)) != pages {
		t.Errorf("archived %d, redelivered %d, never delivered %d: want each of the %d pages once", len(archived), len(redelivered), len(fresh), pages)
	}
}
