package receiver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Deliveries that start within a width of each other share one publish
// context; each one's deadline is at most RECEIVER_PUBLISH_TIMEOUT after
// its start and at least that less the width, and a later delivery gets a
// new context.
func TestPublishDeadlinesShared(t *testing.T) {
	const timeout = 640 * time.Millisecond // width 10ms
	d := newPublishDeadlines(timeout)
	t0 := time.Now()
	check := func(ctx context.Context, start time.Time) time.Time {
		t.Helper()
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("publish context has no deadline")
		}
		if dl.After(start.Add(timeout)) || dl.Before(start.Add(timeout-d.width)) {
			t.Fatalf("deadline %v after start, want within [%v, %v]", dl.Sub(start), timeout-d.width, timeout)
		}
		return dl
	}
	first := d.context(t0)
	dl := check(first, t0)
	if got := d.context(t0.Add(9 * time.Millisecond)); got != first {
		t.Fatal("a delivery 9ms later has a context of its own, want the shared one")
	}
	check(first, t0.Add(9*time.Millisecond))
	second := d.context(t0.Add(10 * time.Millisecond))
	if second == first {
		t.Fatal("a delivery a width later shares the old context")
	}
	if dl2 := check(second, t0.Add(10*time.Millisecond)); !dl2.After(dl) {
		t.Fatalf("the new context ends at %v, not after the old one's %v", dl2, dl)
	}
	// A delivery whose clock reading predates the share (it was taken
	// before another goroutine made it) gets its own context, never a
	// deadline later than its timeout.
	early := d.context(t0.Add(5 * time.Millisecond))
	if early == second {
		t.Fatal("an earlier start shares a later context")
	}
	check(early, t0.Add(5*time.Millisecond))
	if d.context(t0.Add(15*time.Millisecond)) != second {
		t.Fatal("an earlier start replaced the current share")
	}
}

// A shared context ends by itself at its deadline, without anyone
// cancelling it: a publish that waits on it gives up.
func TestPublishDeadlineEnds(t *testing.T) {
	d := newPublishDeadlines(time.Millisecond)
	ctx := d.context(time.Now())
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline exceeded", ctx.Err())
	}
}
