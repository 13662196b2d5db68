package sink

import (
	"fmt"
	"sync"
	"time"
)

// Stall is the state of the batches held because ClickHouse does not take
// them: while it lasts nothing else is archived, so it is exported as
// crawlhouse_sink_stalled and crawlhouse_sink_stalled_seconds and makes
// /readyz answer 503 with the reason (Err). It is safe for concurrent use
// (the commit path writes it, scrapes and probes read it), and exists
// before the Consumer: a sink still starting is not stalled. With several
// inserts in flight (SINK_INSERTS_IN_FLIGHT) several batches may be held at
// once: the stall begins with the first and ends with the last.
type Stall struct {
	now func() time.Time

	mu     sync.Mutex
	since  time.Time   // zero while not stalled
	held   map[any]int // the messages of each batch held, by batch
	reason string
}

// NewStall returns a Stall that is not stalled; now is its clock (nil:
// time.Now).
func NewStall(now func() time.Time) *Stall {
	if now == nil {
		now = time.Now
	}
	return &Stall{now: now, held: map[any]int{}}
}

// hold records a failed attempt on batch, held with n messages; began is
// true for the first attempt of a stall.
func (s *Stall) hold(batch any, err error, n int) (began bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	began = s.since.IsZero()
	if began {
		s.since = s.now()
	}
	s.held[batch], s.reason = n, err.Error()
	return began
}

// release says batch is held no more (committed, or handed back). When it
// was the last one held the stall ends: ended is true and held is how
// long it lasted.
func (s *Stall) release(batch any) (held time.Duration, ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, batch)
	if s.since.IsZero() || len(s.held) > 0 {
		return 0, false
	}
	held = s.now().Sub(s.since)
	s.since, s.reason = time.Time{}, ""
	return held, true
}

// seconds is how long the current stall has lasted, 0 when none.
func (s *Stall) seconds() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return 0
	}
	return max(s.now().Sub(s.since).Seconds(), 0)
}

// stalled is 1 while a batch is held, else 0.
func (s *Stall) stalled() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return 0
	}
	return 1
}

// Err is the readiness answer: nil, or why the sink makes no progress.
func (s *Stall) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return nil
	}
	messages := 0
	for _, n := range s.held {
		messages += n
	}
	return fmt.Errorf("stalled for %s holding %d message(s) ClickHouse does not take: %s",
		s.now().Sub(s.since).Round(time.Second), messages, s.reason)
}
