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
	"github.com/nats-io/nats.go"
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
	// slow, when set, is a URL whose insert takes a while.
	slow string

	mu       sync.Mutex
	arrived  int
	active   int
	most     int // inserts in flight at once, at most
	archived []string
	// asked is what was archived at each PriorFailures.
	asked [][]string
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
	if w.slow != "" && slices.Contains(urls, w.slow) {
		time.Sleep(300 * time.Millisecond)
	}
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
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = append(w.asked, slices.Clone(w.archived))
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

	urlOf := publishPages(t, nc, js, pages, nil)

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
		var order []int
		for _, c := range obs.seen {
			order = append(order, c.ReceivedAt.Second())
		}
		t.Errorf("observers told of pages out of order: %v", order)
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

// publishPages stores n page deliveries p00, p01 … in the events stream
// as the receiver does, the i-th received at second i of a day; those
// whose URL failed names are failed pages. It returns the URL of each
// webhook id.
func publishPages(t *testing.T, nc *nats.Conn, js jetstream.JetStream, n int, failed []string) map[string]string {
	t.Helper()
	eventsCfg := stream.Config{Stream: "CRAWL_EVENTS", SubjectPrefix: "crawl.events", DedupWindow: time.Minute, MaxAge: time.Hour, Replicas: 1}
	pub := stream.NewPublisher(nc, js, eventsCfg, stream.PublisherOptions{})
	defer pub.Close()
	urlOf := map[string]string{}
	start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for i := range n {
		u, webhook := fmt.Sprintf("p%02d", i), uuid.NewString()
		body := fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":"m","metadata":{"sourceURL":%q,"statusCode":200}}]}`,
			uuid.NewString(), webhook, u)
		if slices.Contains(failed, u) {
			body = fmt.Appendf(nil, `{"success":false,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"metadata":{"sourceURL":%q}}],"error":"Request failed with status code 502"}`,
				uuid.NewString(), webhook, u)
		}
		h, err := events.Validate(body)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pub.Publish(context.Background(), delivery.NewEnvelope(eventsCfg.SubjectPrefix, h, body, start.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
		urlOf[webhook] = u
	}
	return urlOf
}

// TestFailuresAskedAfterEarlierBatches: a batch with a failed page asks
// the archive which failures it holds only once every batch fetched before
// it is committed, even while those are still in flight, so that a failure
// delivered twice counts once.
func TestFailuresAskedAfterEarlierBatches(t *testing.T) {
	t.Parallel()
	url := streamtest.Start(t)
	nc, js := streamtest.Connect(t, url)
	// Three batches of five; the first slow, the third with a failure.
	w := newInFlightWriter(1, "")
	w.slow = "p02"
	c := testConsumer(t, js, w, 10, io.Discard)
	c.cfg.BatchSize, c.cfg.InsertsInFlight = 5, 3
	publishPages(t, nc, js, 15, []string{"p12"})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		archived, _ := w.state()
		if len(archived) == 15 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("archived %v, want 15 pages", archived)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.asked) != 1 {
		t.Fatalf("the archive was asked for failures %d times, want once", len(w.asked))
	}
	for i := range 10 {
		if u := fmt.Sprintf("p%02d", i); !slices.Contains(w.asked[0], u) {
			t.Errorf("failures asked before %s, of an earlier batch, was committed (archived then: %v)", u, w.asked[0])
		}
	}
}
