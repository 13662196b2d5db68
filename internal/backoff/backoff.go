// Package backoff is the one retry schedule of crawlhouse: a wait that
// doubles from a first value up to a cap, optionally jittered, and a loop
// that retries on it while a context lives.
//
// It is written here rather than taken from github.com/cenkalti/backoff:
// every caller needs only Delay (some keep their own loop because a wait may
// come from the answer, or an injected clock), the library's stateful
// BackOff and its Permanent/RetryAfter errors would be unused machinery,
// and a new module dependency is not worth some forty lines.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential is a schedule: the wait before retry attempt n (counted from
// 1) is First doubled n-1 times, at most Max.
type Exponential struct {
	// First is the wait after the first failure; a negative First is 0.
	First time.Duration
	// Max caps every wait (a negative Max is 0); math.MaxInt64 is no cap.
	Max time.Duration
	// Jitter draws each wait uniformly from [d/2, d], so that clients that
	// failed together do not retry together.
	Jitter bool
}

// Delay is the wait before retry attempt n (n below 1 counts as 1). It
// never overflows, however large n is.
func (e Exponential) Delay(n int) time.Duration {
	limit := max(e.Max, 0)
	d := min(max(e.First, 0), limit)
	for i := 1; i < n && d > 0 && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	if e.Jitter {
		d = d/2 + rand.N(d/2+1)
	}
	return d
}

// Sleep waits d, or until ctx is done and then returns ctx.Err(). Unlike
// time.After it releases its timer at once when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retry calls f until it returns nil (Retry returns nil), waiting
// s.Delay(n) after the nth failure. Each failure is first handed to onErr
// with its attempt number and the wait that follows; when onErr returns
// false Retry stops and returns that failure. When ctx is done during a
// wait Retry returns ctx.Err().
func Retry(ctx context.Context, s Exponential, f func() error, onErr func(attempt int, err error, wait time.Duration) bool) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		wait := s.Delay(attempt)
		if !onErr(attempt, err, wait) {
			return err
		}
		if err := Sleep(ctx, wait); err != nil {
			return err
		}
	}
}
