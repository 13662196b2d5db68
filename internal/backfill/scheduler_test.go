package backfill

import (
	"context"
	"github.com/rs/zerolog"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlsim"
)

// waitState polls the crawl's record until it reaches state (bounded).
func waitState(t *testing.T, s StateStore, crawlID, state string) Record {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
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
	l, _ := testLogger(t)
	return l
}

func TestSchedulerTriggers(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 10})
	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{Revisit: 300 * time.Millisecond})

	quiet := r.newCrawl(crawlsim.Options{Pages: 12})
	quiet.Finish(crawlsim.StatusCompleted)
	completed := r.newCrawl(crawlsim.Options{Pages: 12})
	completed.Finish(crawlsim.StatusCompleted)
	scraping := r.newCrawl(crawlsim.Options{Pages: 12})
	scraping.Scrape(5)

	s, stop := runScheduler(t, rec, states, SchedulerConfig{Quiet: 400 * time.Millisecond, Tick: 20 * time.Millisecond})
	start := time.Now()
	s.Seen(quiet.ID, start)
	s.Event(completed.ID, "crawl.completed")
	s.Event(scraping.ID, "crawl.page") // ignored: not a trigger
	s.Seen(scraping.ID, start)

	waitState(t, states, completed.ID, StateDone)
	if time.Since(start) > 350*time.Millisecond {
		t.Fatalf("crawl.completed reconciled after %v", time.Since(start))
	}
	waitState(t, states, quiet.ID, StateDone)
	if time.Since(start) < 400*time.Millisecond {
		t.Fatal("quiet crawl reconciled before the quiet period")
	}
	waitState(t, states, scraping.ID, StateScraping)
	scraping.Finish(crawlsim.StatusCompleted)
	waitState(t, states, scraping.ID, StateDone)
	r.assertComplete(quiet)
	r.assertComplete(completed)
	r.assertComplete(scraping)

	// A crawl seen but not yet quiet when the sink stops is reconciled by
	// the next start.
	late := r.newCrawl(crawlsim.Options{Pages: 4})
	late.Finish(crawlsim.StatusCompleted)
	s.Seen(late.ID, time.Now())
	waitState(t, states, late.ID, StatePending)
	stop()
	rec2, states2 := r.reconciler("replica-1", nil, ReconcilerConfig{})
	runScheduler(t, rec2, states2, SchedulerConfig{Quiet: time.Hour, Tick: 20 * time.Millisecond})
	waitState(t, states2, late.ID, StateDone)
	r.assertComplete(late)

	// The one-off run of `sink backfill` reads the crawl again.
	res, err := s.RunOnce(context.Background(), quiet.ID)
	if err != nil || res.State != StateDone || res.Present != 12 {
		t.Fatalf("one-off %+v %v", res, err)
	}
}
