package logs

import (
	"sync"
	"time"
)

// Bounded lets log lines through at a bounded rate, for lines that
// clients who are not authenticated can cause (refused deliveries, browser
// reports): a token bucket of burst lines, refilled at rate lines a second.
// Each line let through learns how many were suppressed since the one
// before, so a flood cannot fill the log disk and the log still tells its
// size. zerolog has a sampler of this kind (BurstSampler), but it neither
// counts what it drops nor takes an injected clock.
type Bounded struct {
	burst, rate float64
	now         func() time.Time

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int64
}

// NewBounded is a full bucket of burst lines refilled at rate lines a
// second, reading the time from now.
func NewBounded(burst int, rate float64, now func() time.Time) *Bounded {
	return &Bounded{burst: float64(burst), rate: rate, now: now, tokens: float64(burst), last: now()}
}

// Allow reports whether a line may be written now and, when it may, how
// many lines were suppressed since the last one allowed.
func (b *Bounded) Allow() (ok bool, suppressed int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}
