package wal

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/rs/zerolog"
)

// streamSyncs stands in for the stream's store: Sync succeeds only while
// it is not held back, and calls during, when set, while it syncs.
type streamSyncs struct {
	mu     sync.Mutex
	held   bool
	calls  int
	during func()
}

func (s *streamSyncs) sync() error {
	s.mu.Lock()
	held, during := s.held, s.during
	s.calls++
	s.mu.Unlock()
	if during != nil {
		during()
	}
	if held {
		return errors.New("the server's sync is held back")
	}
	return nil
}

func (s *streamSyncs) hold(h bool) { s.mu.Lock(); s.held = h; s.mu.Unlock() }

func openSynced(t *testing.T, dir string, s *streamSyncs) *WAL {
	t.Helper()
	w, err := Open(Options{Dir: dir, MaxBytes: 64 << 20, StreamSync: s.sync, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestTrimFollowsTheStreamsSync: an answered entry is deleted only by a
// trim whose sync of the stream succeeded: none before Replay has
// succeeded, none while the server's sync is held back however long, and
// none answered after the sync began.
func TestTrimFollowsTheStreamsSync(t *testing.T) {
	dir := t.TempDir()
	s := &streamSyncs{}
	w := openSynced(t, dir, s)
	for i := range 3 {
		if err := w.Append(envelope(i)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	w = openSynced(t, dir, s)
	defer w.Close()
	if err := w.Trim(); err != nil {
		t.Fatal(err)
	}
	if n := w.count(); n != 3 || s.calls != 0 {
		t.Fatalf("before Replay, Trim left %d entries and synced the stream %d times, want all 3 and none", n, s.calls)
	}
	failing := errors.New("jetstream down")
	if _, err := w.Replay(context.Background(), func(context.Context, *delivery.Envelope) error { return failing }, nil); !errors.Is(err, failing) {
		t.Fatalf("Replay: %v, want the publish error", err)
	}
	if err := w.Trim(); err != nil || w.count() != 3 {
		t.Fatalf("after a failed Replay, Trim: %v, left %d entries, want all 3", err, w.count())
	}
	if got := replayAll(t, w); len(got) != 3 {
		t.Fatalf("Replay published %v, want 3", got)
	}
	if err := w.Append(envelope(3)); err != nil {
		t.Fatal(err)
	}
	s.hold(true)
	for range 10 {
		if err := w.Trim(); err == nil {
			t.Fatal("Trim with the stream's sync failing: no error")
		}
	}
	if n := w.count(); n != 4 {
		t.Fatalf("with the server's sync held back, Trim left %d entries, want all 4", n)
	}
	s.hold(false)
	// Entry 4 is answered while the sync runs: its PubAck may have come
	// after the server's write the sync made durable.
	s.during = func() {
		if err := w.Append(envelope(4)); err != nil {
			t.Error(err)
		}
	}
	if err := w.Trim(); err != nil {
		t.Fatal(err)
	}
	s.during = nil
	if n := w.count(); n != 1 {
		t.Fatalf("after a sync, Trim left %d entries, want only entry 4, answered during it", n)
	}
	if err := w.Trim(); err != nil {
		t.Fatal(err)
	}
	if n := w.count(); n != 0 {
		t.Fatalf("after the next sync, Trim left %d entries, want none", n)
	}
	calls := s.calls
	if err := w.Trim(); err != nil || s.calls != calls {
		t.Errorf("a Trim with nothing new answered synced the stream (%d calls, %v)", s.calls-calls, err)
	}
}

// TestClockSteppedBothWays: the receiver's clock, which stamps each
// delivery, stepped back and forward an hour while running and between two
// processes changes nothing: every entry is replayed, in the order
// written, and none is trimmed before the stream's sync.
func TestClockSteppedBothWays(t *testing.T) {
	dir := t.TempDir()
	s := &streamSyncs{held: true}
	now := time.Unix(1_800_000_000, 0)
	steps := []time.Duration{0, -time.Hour, 10 * time.Millisecond, 2 * time.Hour, -time.Second, -3 * time.Hour}
	w := openSynced(t, dir, s)
	replayAll(t, w)
	var want []string
	for i, step := range steps {
		now = now.Add(step)
		env := envelope(i)
		env.ReceivedAt = now
		if err := w.Append(env); err != nil {
			t.Fatal(err)
		}
		want = append(want, env.WebhookID)
		if err := w.Trim(); err == nil {
			t.Fatal("Trim with the stream's sync held back: no error")
		}
	}
	if n := w.count(); n != len(steps) {
		t.Fatalf("with the clock stepped both ways and the stream not synced, %d of %d entries left", n, len(steps))
	}
	w.Close()

	w = openSynced(t, dir, s) // the clock an hour behind at restart, as above
	defer w.Close()
	got := replayAll(t, w)
	if len(got) != len(want) {
		t.Fatalf("replayed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("replayed %v, want %v in the order written", got, want)
		}
	}
	s.hold(false)
	if err := w.Trim(); err != nil {
		t.Fatal(err)
	}
	if n := w.count(); n != 0 {
		t.Errorf("replayed and synced, %d entries left", n)
	}
}

// openSmall opens a replayed log at the least workable bound, closed at
// the test's end, and gives an entry of 64 KiB to fill it with.
func openSmall(t *testing.T, sync func() error) (*WAL, *delivery.Envelope) {
	t.Helper()
	w, err := Open(Options{Dir: t.TempDir(), MaxBytes: MinMaxBytes, StreamSync: sync, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	replayAll(t, w)
	env := envelope(0)
	env.Body = make([]byte, 64<<10)
	_, _ = rand.Read(env.Body) // as incompressible as pages are not, for pebble's tables
	return w, env
}

// TestSmallBoundDrains: a log bounded at the least workable size takes far
// more than its bound over time, each entry trimmed soon after: the
// memtable, sized from the bound, and the flush near it release the log's
// files, so it never reports full.
func TestSmallBoundDrains(t *testing.T) {
	w, env := openSmall(t, nil)
	for i := range 400 { // 25 MiB through a 4 MiB log
		if err := w.Append(env); err != nil {
			t.Fatalf("entry %d (%d MiB written, all before it trimmed): %v", i, i*64>>10, err)
		}
		if i%4 == 3 {
			if err := w.Trim(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if used := w.measured.Load(); used >= MinMaxBytes {
		t.Errorf("the log holds %d bytes with everything trimmed, want below its bound %d", used, MinMaxBytes)
	}
}

// TestFullLogDrainsOnceSynced: a log filled to its bound while the
// stream's sync failed (nothing could be trimmed) takes deliveries again
// once the sync succeeds, without any new write to push its memtable out.
func TestFullLogDrainsOnceSynced(t *testing.T) {
	s := &streamSyncs{held: true}
	w, env := openSmall(t, s.sync)
	full := false
	for i := 0; i < 400 && !full; i++ {
		err := w.Append(env)
		full = errors.Is(err, ErrFull)
		if err != nil && !full {
			t.Fatal(err)
		}
		_ = w.Trim() // fails: held back
	}
	if !full {
		t.Fatalf("25 MiB never trimmed did not fill a 4 MiB log (%d bytes, %d entries, %d syncs)", w.measured.Load(), w.count(), s.calls)
	}
	s.hold(false)
	var last error
	for range 50 {
		if err := w.Trim(); err != nil {
			t.Fatal(err)
		}
		if last = w.Append(env); last == nil {
			return
		}
		time.Sleep(20 * time.Millisecond) // pebble's compactions are its own
	}
	t.Fatalf("with every entry trimmed, the log still refuses: %v (%d bytes)", last, w.measured.Load())
}
