package receiver

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// admitted is one body in the pool of a test admission.
type admitted struct {
	c   *claim
	res *reservation
}

func admitFrom(t *testing.T, a *admission, b *byteBudget, addr string) (admitted, error) {
	t.Helper()
	res := &reservation{b: b}
	c, err := a.admit(senderOf(addr), res, httptest.NewRecorder())
	return admitted{c, res}, err
}

// admissionAt is an admission whose clock reads *now, with a pool of max
// bodies (max per address too) and 1 MiB, and its byte budget of 4 MiB.
func admissionAt(now *time.Time, max int) (*admission, *byteBudget) {
	cfg := Config{MaxUnverified: max, MaxUnverifiedPerAddr: max, MaxUnverifiedBytes: 1 << 20,
		MaxUnverifiedBytesPerAddr: 1 << 20, MaxInflightBytes: 4 << 20}
	return newAdmission(cfg, func() time.Time { return *now }), newByteBudget(cfg.MaxInflightBytes)
}

// TestAdmissionEvictsSlowest: a full pool makes room for a newcomer by
// evicting the body that has arrived slowest (time held per byte, one byte
// more each), never a fast one or the newcomer; the evicted body's
// reservation gets no more bytes, and its release counts nothing twice.
// Bytes are made the same way: a body that cannot grow evicts the slowest
// other bodies, and is refused when none is left.
func TestAdmissionEvictsSlowest(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	a, b := admissionAt(&now, 3)

	idle, _ := admitFrom(t, a, b, "127.0.0.2") // held 10 s, nothing arrived
	fast, _ := admitFrom(t, a, b, "127.0.0.3") // held 10 s, 1 000 bytes
	fast.c.got.Store(1000)
	now = t0.Add(time.Second)
	young, _ := admitFrom(t, a, b, "127.0.0.4") // held 9 s, nothing
	now = t0.Add(10 * time.Second)

	newcomer, err := admitFrom(t, a, b, "127.0.0.5")
	if err != nil {
		t.Fatalf("a newcomer to a full pool: %v, want a place", err)
	}
	if !idle.c.evicted.Load() || fast.c.evicted.Load() || young.c.evicted.Load() {
		t.Fatalf("evicted: idle %v, fast %v, young %v; want only the idle body",
			idle.c.evicted.Load(), fast.c.evicted.Load(), young.c.evicted.Load())
	}
	if err := idle.res.grow(10); !errors.Is(err, errEvicted) {
		t.Errorf("an evicted body grows: %v, want errEvicted", err)
	}
	idle.c.release(idle.res)
	if a.reading != 3 || len(a.pool) != 3 || len(a.senders) != 3 {
		t.Fatalf("after the evicted body's release: %d reading, %d in the pool, %d senders; want 3 each", a.reading, len(a.pool), len(a.senders))
	}

	// Bytes: the newcomer needs most of the pool's bytes.
	if err := young.res.grow(600 << 10); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if err := newcomer.res.grow(700 << 10); err != nil {
		t.Fatalf("a body that needs the bytes a slower one holds: %v, want them", err)
	}
	if !young.c.evicted.Load() || fast.c.evicted.Load() {
		t.Fatalf("evicted for bytes: young %v, fast %v; want the young (slowest) only", young.c.evicted.Load(), fast.c.evicted.Load())
	}
	if got := a.UnverifiedBytes(); got != 700<<10 {
		t.Errorf("pool bytes %d, want the newcomer's %d", got, 700<<10)
	}
	// The evicted body's buffer is still counted where memory is.
	if got := b.InUse(); got != 1300<<10 {
		t.Errorf("in-flight bytes %d, want both buffers (%d) until the evicted one is let go", got, 1300<<10)
	}
	young.c.release(young.res)
	young.res.releaseAll()

	fast.c.release(fast.res)
	if err := newcomer.res.grow(1 << 20); err == nil || a.UnverifiedBytes() != 700<<10 {
		t.Errorf("a body alone in the pool, past its bytes: %v with %d pool bytes, want a refusal", err, a.UnverifiedBytes())
	}
	newcomer.c.release(newcomer.res)
	newcomer.res.releaseAll()
	if a.reading != 0 || len(a.pool) != 0 || len(a.senders) != 0 || a.UnverifiedBytes() != 0 || b.InUse() != 0 {
		t.Errorf("after every release: %d reading, %d in the pool, %d senders, %d pool bytes, %d in flight; want 0",
			a.reading, len(a.pool), len(a.senders), a.UnverifiedBytes(), b.InUse())
	}
}

// TestAdmissionConcurrent: admissions, growths, evictions and releases
// from many goroutines at once (run with -race) keep the pool within its
// bounds and give everything back.
func TestAdmissionConcurrent(t *testing.T) {
	cfg := Config{MaxUnverified: 8, MaxUnverifiedPerAddr: 8, MaxUnverifiedBytes: 64 << 10,
		MaxUnverifiedBytesPerAddr: 64 << 10, MaxInflightBytes: 1 << 20}
	a := newAdmission(cfg, time.Now)
	b := newByteBudget(cfg.MaxInflightBytes)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				res := &reservation{b: b}
				c, err := a.admit(senderOf(fmt.Sprintf("127.0.%d.%d", g, i%7)), res, httptest.NewRecorder())
				if err != nil {
					continue
				}
				for k := 0; k < 4 && res.grow(int64(4<<10)) == nil; k++ {
					c.got.Add(4 << 10)
					if u := a.UnverifiedBytes(); u > cfg.MaxUnverifiedBytes {
						t.Errorf("pool bytes %d past %d", u, cfg.MaxUnverifiedBytes)
					}
				}
				c.release(res)
				res.releaseAll()
			}
		}()
	}
	wg.Wait()
	if a.reading != 0 || len(a.pool) != 0 || a.UnverifiedBytes() != 0 || b.InUse() != 0 || a.Reading() != 0 {
		t.Errorf("after every release: %d reading, %d in the pool, %d pool bytes, %d in flight", a.reading, len(a.pool), a.UnverifiedBytes(), b.InUse())
	}
}

// TestAdmissionKeepsReadBodies: a body read to its end is not evicted (its
// connection's deadline is lifted for the publish that follows); a
// newcomer to a pool of such bodies only is refused.
func TestAdmissionKeepsReadBodies(t *testing.T) {
	cfg := Config{MaxUnverified: 1, MaxUnverifiedPerAddr: 1, MaxUnverifiedBytes: 1 << 20,
		MaxUnverifiedBytesPerAddr: 1 << 20, MaxInflightBytes: 4 << 20}
	a := newAdmission(cfg, time.Now)
	b := newByteBudget(cfg.MaxInflightBytes)
	first, _ := admitFrom(t, a, b, "127.0.0.2")
	first.c.read()
	if _, err := admitFrom(t, a, b, "127.0.0.3"); !errors.Is(err, errOverloaded) {
		t.Errorf("a newcomer to a pool of bodies read to their end: %v, want errOverloaded", err)
	}
	if first.c.evicted.Load() {
		t.Error("a body read to its end was evicted")
	}
}

// TestAdmissionTrust: an address is trusted (its bodies skip the pool) for
// trustFor after its last verified delivery, and no longer.
func TestAdmissionTrust(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	a, b := admissionAt(&now, 8)
	deliver := func(at time.Duration) (pooled bool) {
		t.Helper()
		now = t0.Add(at)
		d, err := admitFrom(t, a, b, "192.0.2.7")
		if err != nil {
			t.Fatalf("at %v: %v", at, err)
		}
		d.c.verified()
		d.c.release(d.res)
		d.res.releaseAll()
		return d.c.pooled
	}
	steps := []struct {
		at     time.Duration
		pooled bool
	}{
		{0, true},                         // not trusted yet; trusted from now on
		{30 * time.Second, false},         // trusted; renewed
		{trustFor, false},                 // within trustFor of the renewal
		{2*trustFor + time.Second, true},  // past it
		{2*trustFor + time.Minute, false}, // trusted again by the one before
	}
	for _, s := range steps {
		if got := deliver(s.at); got != s.pooled {
			t.Errorf("a verified sender's body at %v: pooled %v, want %v", s.at, got, s.pooled)
		}
	}
}
