package wal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

func envelope(i int) *delivery.Envelope {
	body := []byte(fmt.Sprintf(`{"type":"crawl.page","webhookId":"id-%d","data":[]}`, i))
	return &delivery.Envelope{
		Subject: "crawl.events.crawl.page", WebhookID: fmt.Sprintf("id-%d", i), CrawlID: "crawl-1",
		Type: "crawl.page", ReceivedAt: time.Unix(1700000000, int64(i)).UTC(), Size: len(body), Body: body,
	}
}

func open(t *testing.T, dir string, reg prometheus.Registerer) *WAL {
	t.Helper()
	w, err := Open(Options{Dir: dir, MaxBytes: 64 << 20, Registerer: reg, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// replayAll replays w and returns the webhookIds in order.
func replayAll(t *testing.T, w *WAL) []string {
	t.Helper()
	var ids []string
	n, err := w.Replay(context.Background(), func(_ context.Context, env *delivery.Envelope) error {
		ids = append(ids, env.WebhookID)
		return nil
	}, func(err error) { t.Errorf("bad entry: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ids) {
		t.Errorf("Replay said %d, published %d", n, len(ids))
	}
	return ids
}

// TestReplayAfterReopen: what one process appended, the next replays, in
// order and byte for byte; what the replaying process appends itself is
// not replayed by it.
func TestReplayAfterReopen(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, nil)
	for i := range 5 {
		if err := w.Append(envelope(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := replayAll(t, w); len(got) != 0 {
		t.Errorf("the process that wrote them replayed %v", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(envelope(9)); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}

	w2 := open(t, dir, nil)
	defer w2.Close()
	if err := w2.Append(envelope(5)); err != nil {
		t.Fatal(err)
	}
	var got []*delivery.Envelope
	if _, err := w2.Replay(context.Background(), func(_ context.Context, env *delivery.Envelope) error {
		got = append(got, env)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("replayed %d entries, want the 5 of the first process", len(got))
	}
	for i, env := range got {
		want := envelope(i)
		if env.WebhookID != want.WebhookID || env.Subject != want.Subject || env.CrawlID != want.CrawlID ||
			env.Type != want.Type || !env.ReceivedAt.Equal(want.ReceivedAt) || string(env.Body) != string(want.Body) || env.Size != want.Size {
			t.Errorf("entry %d replayed as %+v, want %+v", i, env, want)
		}
	}
}

// TestFull: past MaxBytes, Append refuses with ErrFull and writes nothing;
// a bound too small to work is refused at Open.
func TestFull(t *testing.T) {
	if _, err := Open(Options{Dir: t.TempDir(), MaxBytes: MinMaxBytes - 1, Logger: zerolog.Nop()}); err == nil || !strings.Contains(err.Error(), "MaxBytes") {
		t.Fatalf("Open with MaxBytes below MinMaxBytes: %v, want refused", err)
	}
	w, err := Open(Options{Dir: t.TempDir(), MaxBytes: MinMaxBytes, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	big := envelope(0)
	big.Body = make([]byte, 256<<10)
	n := 0
	for ; n < 100; n++ {
		if err := w.Append(big); errors.Is(err, ErrFull) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if n == 100 {
		t.Fatalf("%d entries of 256 KiB, never trimmed, fit in a log bounded at 4 MiB", n)
	}
	if got := w.count(); got != n {
		t.Errorf("the log holds %d entries, want the %d taken: a refused Append wrote", got, n)
	}
	if got := testutil.ToFloat64(w.m.failures.WithLabelValues("full")); got != 1 {
		t.Errorf(`crawlhouse_receiver_wal_failures_total{reason="full"} = %v, want 1`, got)
	}
}

// TestConcurrentAppends: concurrent committers all get their entry stored.
func TestConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, nil)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				if err := w.Append(envelope(g*100 + i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	w.Close()
	w = open(t, dir, nil)
	defer w.Close()
	got := replayAll(t, w)
	seen := map[string]bool{}
	for _, id := range got {
		seen[id] = true
	}
	if len(got) != 320 || len(seen) != 320 {
		t.Errorf("replayed %d entries (%d distinct), want 320", len(got), len(seen))
	}
}

// TestDecodeRefusesCorruptEntries: truncated or altered entries are
// errors, never a panic or a delivery.
func TestDecodeRefusesCorruptEntries(t *testing.T) {
	env := envelope(1)
	b := make([]byte, recordLen(env))
	putRecord(b, env)
	if _, err := decodeRecord(b); err != nil {
		t.Fatalf("a whole entry: %v", err)
	}
	for n := range len(b) {
		if _, err := decodeRecord(b[:n]); !errors.Is(err, errCorrupt) {
			t.Fatalf("entry cut to %d bytes: %v, want errCorrupt", n, err)
		}
	}
	bad := append([]byte(nil), b...)
	bad[0] = 9
	if _, err := decodeRecord(bad); !errors.Is(err, errCorrupt) {
		t.Errorf("unknown version: %v", err)
	}
	long := append(append([]byte(nil), b...), 'x')
	if _, err := decodeRecord(long); !errors.Is(err, errCorrupt) {
		t.Errorf("trailing byte: %v", err)
	}
}

// count is the number of entries in the log.
func (w *WAL) count() int {
	it, err := w.db.NewIter(&pebble.IterOptions{})
	if err != nil {
		panic(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// TestTrimKeepsEntriesInFlight: an entry whose delivery is not answered
// yet (no Done: its PubAck may still come) is kept however many syncs of
// the stream pass, and so is everything after it; once answered, it goes
// at the next trim.
func TestTrimKeepsEntriesInFlight(t *testing.T) {
	w := open(t, t.TempDir(), nil)
	defer w.Close()
	replayAll(t, w)
	p, err := w.Begin(envelope(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(envelope(2)); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := w.Trim(); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.count(); n != 2 {
		t.Fatalf("with entry 1 in flight, Trim left %d entries, want both", n)
	}
	p.Done()
	if err := w.Trim(); err != nil {
		t.Fatal(err)
	}
	if n := w.count(); n != 0 {
		t.Fatalf("once entry 1 was answered, Trim left %d entries, want none", n)
	}
}

// TestCommitDelayGathersSiblings: with CommitSiblings deliveries in
// flight, the committer waits before its sync, and entries handed over
// meanwhile are committed in the same group, with one fsync; none is
// reported stored before that sync.
func TestCommitDelayGathersSiblings(t *testing.T) {
	waiting, release := make(chan struct{}), make(chan struct{})
	w, err := Open(Options{Dir: t.TempDir(), MaxBytes: 64 << 20, Logger: zerolog.Nop(),
		CommitDelay: time.Hour, CommitSiblings: 3,
		wait: func(d time.Duration, _ <-chan struct{}) {
			if d != time.Hour {
				t.Errorf("waited %s, want CommitDelay", d)
			}
			select {
			case waiting <- struct{}{}:
				<-release
			case <-release: // later waits, once the test has let go
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Two deliveries stored and still in flight (not answered): below
	// the siblings, so no wait.
	var held []*Pending
	for i := range 2 {
		p, err := w.Begin(envelope(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	// The third makes three in flight: the committer waits.
	third, err := w.Begin(envelope(2))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-waiting:
	case <-third.g.done:
		t.Fatal("with CommitSiblings deliveries in flight, the entry was synced without waiting")
	}
	var later []*Pending
	for i := 3; i < 6; i++ {
		p, err := w.Begin(envelope(i))
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, p)
	}
	for _, p := range append([]*Pending{third}, later...) {
		select {
		case <-p.g.done:
			t.Fatal("an entry was reported stored while the committer was still waiting to sync it")
		default:
		}
		if p.g != third.g {
			t.Fatal("an entry handed over during the wait went to another group than the waiting one")
		}
	}
	close(release)
	for _, p := range append([]*Pending{third}, later...) {
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		p.Done()
	}
	for _, p := range held {
		p.Done()
	}
	if n := w.count(); n != 6 {
		t.Fatalf("the log holds %d entries, want 6", n)
	}
}

// TestNoCommitDelayBelowSiblings: with fewer deliveries in flight than
// CommitSiblings, every entry is synced without waiting.
func TestNoCommitDelayBelowSiblings(t *testing.T) {
	w, err := Open(Options{Dir: t.TempDir(), MaxBytes: 64 << 20, Logger: zerolog.Nop(),
		CommitDelay: time.Hour, CommitSiblings: 100,
		wait: func(time.Duration, <-chan struct{}) { t.Error("the committer waited with one delivery in flight") }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 10 {
		if err := w.Append(envelope(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.count(); n != 10 {
		t.Fatalf("the log holds %d entries, want 10", n)
	}
}

// TestCloseCutsTheCommitDelay: Close during the committer's wait (the
// real one, an hour long) returns, and the waiting entry is on disk for the
// next start.
func TestCloseCutsTheCommitDelay(t *testing.T) {
	dir := t.TempDir()
	entered := make(chan struct{}, 1)
	w, err := Open(Options{Dir: dir, MaxBytes: 64 << 20, Logger: zerolog.Nop(),
		CommitDelay: time.Hour, CommitSiblings: 1,
		wait: func(d time.Duration, stop <-chan struct{}) {
			entered <- struct{}{}
			sleep(d, stop)
		}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.Begin(envelope(1))
	if err != nil {
		t.Fatal(err)
	}
	<-entered // the committer is in its hour-long wait
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("the entry waiting for its sync at Close: %v", err)
	}
	w = open(t, dir, nil)
	defer w.Close()
	if got := replayAll(t, w); len(got) != 1 || got[0] != "id-1" {
		t.Fatalf("replayed %v, want [id-1]", got)
	}
}
