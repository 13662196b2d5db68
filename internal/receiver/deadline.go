package receiver

import (
	"context"
	"sync/atomic"
	"time"
)

// publishDeadlines gives each delivery's publish a context that ends
// RECEIVER_PUBLISH_TIMEOUT after the delivery started, or up to a width
// (1/64 of the timeout) before that: deliveries that start within one
// width of each other share a context. A context of its own costs every
// delivery a timer armed and stopped and six allocations (BenchmarkDelivery:
// 153 against 147 a delivery) for a deadline that is the same for all of
// them; the shared one is made about 64 times a timeout and ends by its own
// timer. Nothing cancels a shared context early: a sender that hangs up
// does not cut its publish short (its retry is a duplicate either way).
//
// A shared context carries no request values, so with tracing on each
// delivery makes its own (deliver): the span travels in it.
type publishDeadlines struct {
	timeout, width time.Duration
	cur            atomic.Pointer[deadlineShare]
}

// deadlineShare is one shared context and when it was made.
type deadlineShare struct {
	ctx    context.Context
	cancel context.CancelFunc // not called: the context's timer ends it
	from   time.Time
}

func newPublishDeadlines(timeout time.Duration) *publishDeadlines {
	return &publishDeadlines{timeout: timeout, width: timeout / 64}
}

// context is the publish context of a delivery that started at now (a
// reading of time.Now, with its monotonic clock).
func (d *publishDeadlines) context(now time.Time) context.Context {
	sh := d.cur.Load()
	if sh != nil && !now.Before(sh.from) && now.Sub(sh.from) < d.width {
		return sh.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(d.timeout))
	next := &deadlineShare{ctx: ctx, cancel: cancel, from: now}
	// Losing the race to another delivery's share is harmless: this one
	// keeps its own context, and the next deliveries take the winner's. A
	// reading older than the current share (taken before another delivery
	// made it) never replaces it.
	if sh == nil || now.After(sh.from) {
		d.cur.CompareAndSwap(sh, next)
	}
	return ctx
}
