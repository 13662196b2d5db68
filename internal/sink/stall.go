package sink

import (
	"fmt"
	"sync"
	"time"
)

// stall is the state of a batch held because ClickHouse does not take it:
// while it lasts nothing else is archived, so it is exported as
// crawlhouse_sink_stalled and crawlhouse_sink_stalled_seconds and makes
// /readyz answer 503 with the reason. It is safe for concurrent use (the
// commit path writes it, scrapes and probes read it).
type stall struct {
	now func() time.Time

	mu       sync.Mutex
	since    time.Time // zero while not stalled
	messages int
	reason   string
}

func newStall(now func() time.Time) *stall {
	if now == nil {
		now = time.Now
	}
	return &stall{now: now}
}

// hold records a failed attempt on a held batch of n messages; began is
// true for the first attempt of a stall.
func (s *stall) hold(err error, n int) (began bool) {
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
func (s *stall) clear() (held time.Duration, was bool) {
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
func (s *stall) seconds() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return 0
	}
	return max(s.now().Sub(s.since).Seconds(), 0)
}

// stalled is 1 while a batch is held, else 0.
func (s *stall) stalled() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return 0
	}
	return 1
}

// err is the readiness answer: nil, or why the sink makes no progress.
func (s *stall) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return nil
	}
	return fmt.Errorf("stalled for %s holding %d message(s) ClickHouse does not take: %s",
		s.now().Sub(s.since).Round(time.Second), s.messages, s.reason)
}
