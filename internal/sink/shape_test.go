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
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
)

// insertsWriter is ClickHouse taking every insert, keeping the URLs of
// each.
type insertsWriter struct {
	mu      sync.Mutex
	inserts [][]string
}

func (w *insertsWriter) Insert(_ context.Context, rows archive.Rows) error {
	var urls []string
	for _, p := range rows.Pages {
		urls = append(urls, p.URL)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inserts = append(w.inserts, urls)
	return nil
}

func (w *insertsWriter) Ping(context.Context) error { return nil }

func (w *insertsWriter) PriorFailures(_ context.Context, fs []archive.Failure) ([]archive.Prior, error) {
	return make([]archive.Prior, len(fs)), nil
}

// archived is every URL inserted so far, and the inserts.
func (w *insertsWriter) archived() ([]string, [][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Concat(w.inserts...), slices.Clone(w.inserts)
}

// runUntil runs c until w has archived n pages (or a minute passed), then
// stops it.
func runUntil(t *testing.T, c *Consumer, w *insertsWriter, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if got, _ := w.archived(); len(got) >= n {
			return
		}
		if time.Now().After(deadline) {
			got, _ := w.archived()
			t.Fatalf("archived %v, want %d pages", got, n)
		}
	}
}

// pageSize is the delivery bytes of each of publishPages's pages (they
// are all the same length).
func pageSize() int {
	return len(fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":"m","metadata":{"sourceURL":%q,"statusCode":200}}]}`,
		uuid.NewString(), uuid.NewString(), "p00"))
}

// TestInsertsBoundedByBytes: SINK_BATCH_BYTES, not SINK_BATCH_SIZE alone,
// bounds what one insert takes: a fetch of 20 deliveries with room for
// 1 000 is inserted in batches of at most the bytes of three, every page
// once.
func TestInsertsBoundedByBytes(t *testing.T) {
	t.Parallel()
	url := streamtest.Start(t)
	nc, js := streamtest.Connect(t, url)
	w := &insertsWriter{}
	c := testConsumer(t, js, w, 10, io.Discard)
	c.cfg.BatchBytes = 3*pageSize() + pageSize()/2
	publishPages(t, nc, js, 20, nil)
	runUntil(t, c, w, 20)

	all, inserts := w.archived()
	for i, in := range inserts {
		if len(in) > 3 {
			t.Errorf("insert %d took %d deliveries (%v), more than SINK_BATCH_BYTES holds (3)", i, len(in), in)
		}
	}
	slices.Sort(all)
	if len(all) != 20 || len(slices.Compact(all)) != 20 {
		t.Errorf("archived %v, want each of the 20 pages once", all)
	}
}

// TestTrickleNotHeldForBatch: at a low rate a delivery is inserted once
// the fetch's SINK_BATCH_WAIT is over, in an insert of its own, however
// large SINK_BATCH_SIZE and SINK_BATCH_BYTES are: a batch is bounded by
// messages, bytes and time, and the first bound reached ends it.
func TestTrickleNotHeldForBatch(t *testing.T) {
	t.Parallel()
	url := streamtest.Start(t)
	nc, js := streamtest.Connect(t, url)
	w := &insertsWriter{}
	c := testConsumer(t, js, w, 10, io.Discard)
	c.cfg.BatchSize, c.cfg.BatchBytes, c.cfg.BatchWait = 100000, 1<<30, 100*time.Millisecond
	publishPages(t, nc, js, 1, nil)
	runUntil(t, c, w, 1)
	if _, inserts := w.archived(); len(inserts) != 1 || !slices.Equal(inserts[0], []string{"p00"}) {
		t.Errorf("inserts %v, want one of the one page delivered", inserts)
	}
}

// heldWriter is insertsWriter whose first insert waits until release is
// closed, started closed when it began.
type heldWriter struct {
	*insertsWriter
	once             sync.Once
	started, release chan struct{}
}

func (w *heldWriter) Insert(ctx context.Context, rows archive.Rows) error {
	w.once.Do(func() { close(w.started); <-w.release })
	return w.insertsWriter.Insert(ctx, rows)
}

// TestTrickleWaitsOneInsert: a delivery that arrives while an insert runs
// goes in the insert right after it, alone: it waits for its fetch's
// SINK_BATCH_WAIT and the insert in progress, never for a batch to fill
// (by order, with SINK_BATCH_SIZE 100 000 and SINK_BATCH_BYTES 1 GiB).
func TestTrickleWaitsOneInsert(t *testing.T) {
	t.Parallel()
	url := streamtest.Start(t)
	nc, js := streamtest.Connect(t, url)
	w := &heldWriter{insertsWriter: &insertsWriter{}, started: make(chan struct{}), release: make(chan struct{})}
	c := testConsumer(t, js, w, 10, io.Discard)
	c.cfg.BatchSize, c.cfg.BatchBytes, c.cfg.BatchWait = 100000, 1<<30, 100*time.Millisecond
	publishPages(t, nc, js, 1, nil)
	go func() {
		<-w.started
		// The second delivery comes while the first one's insert runs,
		// and the insert ends once the sink has fetched it.
		publishPages(t, nc, js, 1, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for ctx.Err() == nil {
			if info, err := c.src.Info(ctx); err == nil && info.NumAckPending == 2 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(w.release)
	}()
	runUntil(t, c, w.insertsWriter, 2)
	if _, inserts := w.archived(); len(inserts) != 2 || len(inserts[0]) != 1 || len(inserts[1]) != 1 {
		t.Errorf("inserts %v, want two of one page each, the second right after the first", inserts)
	}
}

// TestBytesInHand: batches in hand are bounded by bytes as well as by
// count (with room for eight batches but bytes for two full ones), and
// the next batch is not even received while a full one would not fit, so
// that no more than one batch waits beyond the bound.
func TestBytesInHand(t *testing.T) {
	t.Parallel()
	const batch = 10 << 20
	for _, tc := range []struct {
		name string
		held []int           // batches in hand, by bytes
		wait func(h *inHand) // what must wait
		give int             // the batch given back that lets it go on
	}{
		{"a third full batch taken", []int{batch, batch}, func(h *inHand) { h.take(batch) }, batch},
		{"room while a full batch would not fit", []int{batch, 1}, (*inHand).room, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newInHand(8, 2*batch, batch)
			for _, n := range tc.held {
				h.take(n)
			}
			var mu sync.Mutex
			var order []string
			note := func(s string) { mu.Lock(); defer mu.Unlock(); order = append(order, s) }
			done := make(chan struct{})
			go func() {
				tc.wait(h)
				note("went on")
				close(done)
			}()
			// A while for a wait that does not wait to show it.
			time.Sleep(100 * time.Millisecond)
			note("one given back")
			h.give(tc.give)
			<-done
			if !slices.Equal(order, []string{"one given back", "went on"}) {
				t.Errorf("order %v: went on beyond the bytes in hand", order)
			}
		})
	}
}
