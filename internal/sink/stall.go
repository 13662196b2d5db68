package sink

import (
	"fmt"
	"sync"
	"time"
)

// Stall is the state of a batch held because ClickHouse does not take it:
// while it lasts nothing else is archived, so it is exported as
// crawlhouse_sink_stalled and crawlhouse_sink_stalled_seconds and makes
// /readyz answer 503 with the reason (Err). It is safe for concurrent use
// (the commit path writes it, scrapes and probes read it), and exists
// before the Consumer: a sink still starting is not stalled.
type Stall struct {
	now func() time.Time

	mu       sync.Mutex
	since    time.Time // zero while not stalled
	messages int
	reason   string
}

// NewStall returns a Stall that is not stalled; now is its clock (nil:
// time.Now).
func NewStall(now func() time.Time) *Stall {
	if now == nil {
		now = time.Now
	}
	return &Stall{now: now}
}

// hold records a failed attempt on a held batch of n messages; began is
// true for the first attempt of a stall.
func (s *Stall) hold(err error, n int) (began bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	began = s.since.IsZero()
	if began {
		s.since = s.now()
	}
	s.messages, s.reason = n, err.Error()
	return began
}

// clear ends the stall, if any, and returns how long it lasted.
func (s *Stall) clear() (held time.Duration, was bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return 0, false
	}
	held = s.now().Sub(s.since)
	s.since, s.messages, s.reason = time.Time{}, 0, ""
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
	return fmt.Errorf("stalled for %s holding %d message(s) ClickHouse does not take: %s",
		s.now().Sub(s.since).Round(time.Second), s.messages, s.reason)
}
