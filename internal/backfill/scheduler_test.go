package backfill

import (
	"context"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/rs/zerolog"
)

// waitState polls the crawl's record until it reaches state, with a
// deadline generous enough for a busy machine.
func waitState(t *testing.T, s StateStore, crawlID, state string) Record {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, _, err := s.Get(context.Background(), crawlID)
		if err == nil && rec.State == state {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl %s: state %q, want %q (%v)", crawlID, rec.State, state, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func runScheduler(t *testing.T, rec *Reconciler, states StateStore, cfg SchedulerConfig) (*Scheduler, context.CancelFunc) {
	t.Helper()
	s, err := NewScheduler(rec, states, testLoggerNop(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	stop := func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return s, stop
}

func testLoggerNop(t *testing.T) zerolog.Logger {
	l, _ := logtest.WithoutSecret(t, testKey)
	return l
}

// waitPasses returns once the scheduler has looked for due crawls n more
// times: what it did not start by then, it did not find due.
func waitPasses(t *testing.T, s *Scheduler, n int64) {
	t.Helper()
	target := s.passes.Load() + n
	deadline := time.Now().Add(15 * time.Second)
	for s.passes.Load() < target {
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler looked %d times, want %d", s.passes.Load(), target)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantState fails unless the crawl's record is in state now.
func wantState(t *testing.T, s StateStore, crawlID, state string) {
	t.Helper()
	rec, _, err := s.Get(context.Background(), crawlID)
	if err != nil || rec.State != state {
		t.Fatalf("crawl %s: state %q %v, want %q", crawlID, rec.State, err, state)
	}
}

// TestSchedulerTriggers runs the scheduler on the rig's clock, which only
// the test moves: a crawl.completed crawl is run while no time has passed, a
// quiet crawl exactly when the quiet period has, a scraping crawl again at
// its revisit time. Real time only paces the ticks, so a slow machine
// changes nothing but how long the test takes.
func TestSchedulerTriggers(t *testing.T) {
	t.Parallel()
	const quietPeriod, revisit = 2 * time.Minute, 5 * time.Minute
	r := newRig(t, crawlsim.APIOptions{PageDocs: 10})
	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{Revisit: revisit})

	quiet := r.newCrawl(crawlsim.Options{Pages: 12})
	quiet.Finish(crawlapi.StatusCompleted)
	completed := r.newCrawl(crawlsim.Options{Pages: 12})
	completed.Finish(crawlapi.StatusCompleted)
	scraping := r.newCrawl(crawlsim.Options{Pages: 12})
	scraping.Scrape(5)

	s, stop := runScheduler(t, rec, states, SchedulerConfig{Quiet: quietPeriod, Tick: 10 * time.Millisecond, Now: r.clock.now})
	start := r.clock.now()
	s.Seen(quiet.ID, start)
	s.Event(completed.ID, "crawl.completed")
	s.Event(scraping.ID, "crawl.page") // ignored: not a trigger
	s.Seen(scraping.ID, start)

	// crawl.completed: reconciled with no time passed; the others wait.
	waitState(t, states, completed.ID, StateDone)
	waitState(t, states, quiet.ID, StatePending)
	waitPasses(t, s, 3)
	wantState(t, states, quiet.ID, StatePending)
	wantState(t, states, scraping.ID, StatePending)

	// A moment short of the quiet period: still waiting.
	r.clock.add(quietPeriod - time.Second)
	waitPasses(t, s, 3)
	wantState(t, states, quiet.ID, StatePending)

	// The quiet period is over: both quiet crawls run; the one still
	// scraping waits for its revisit.
	r.clock.add(time.Second)
	waitState(t, states, quiet.ID, StateDone)
	waitState(t, states, scraping.ID, StateScraping)
	scraping.Finish(crawlapi.StatusCompleted)
	waitPasses(t, s, 3)
	wantState(t, states, scraping.ID, StateScraping)
	r.clock.add(revisit)
	waitState(t, states, scraping.ID, StateDone)
	r.assertComplete(quiet)
	r.assertComplete(completed)
	r.assertComplete(scraping)

	// A crawl seen but not yet quiet when the sink stops is reconciled by
	// the next start, once its quiet period is over.
	late := r.newCrawl(crawlsim.Options{Pages: 4})
	late.Finish(crawlapi.StatusCompleted)
	s.Seen(late.ID, r.clock.now())
	waitState(t, states, late.ID, StatePending)
	stop()
	rec2, states2 := r.reconciler("replica-1", nil, ReconcilerConfig{})
	s2, _ := runScheduler(t, rec2, states2, SchedulerConfig{Quiet: time.Hour, Tick: 10 * time.Millisecond, Now: r.clock.now})
	waitPasses(t, s2, 3)
	wantState(t, states2, late.ID, StatePending)
	r.clock.add(quietPeriod)
	waitState(t, states2, late.ID, StateDone)
	r.assertComplete(late)

	// The one-off run of `sink backfill` reads the crawl again.
	res, err := s.RunOnce(context.Background(), quiet.ID, "")
	if err != nil || res.State != StateDone || res.Present != 12 {
		t.Fatalf("one-off %+v %v", res, err)
	}
}
