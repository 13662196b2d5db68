package backfill

import (
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsStartAtZero: every result and final state is exported before
// the first event, so that rate() and the alerts have a series.
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	_, reg := newTestMetrics(t)
	var want []string
	for _, r := range []string{ResultFetched, ResultInserted, ResultPresent, ResultSkipped} {
		want = append(want, `crawlhouse_backfill_pages_total{result="`+r+`"} 0`)
	}
	for _, s := range []string{StateDone, StateScraping, StateExpired, StateDenied, StateFailed, StatePending} {
		want = append(want, `crawlhouse_backfill_runs_total{state="`+s+`"} 0`)
	}
	want = append(want, `crawlhouse_backfill_crawls{state="waiting"} 0`, `crawlhouse_backfill_crawls{state="running"} 0`)
	wantSeries(t, reg, want...)
}

// TestMetricsRegistration: a registerer is required, and a failed
// registration leaves the registry as it was, so that the sink's start-up
// retry can register again.
func TestMetricsRegistration(t *testing.T) {
	t.Parallel()
	if _, err := NewMetrics(nil); err == nil {
		t.Error("NewMetrics(nil) succeeded")
	}

	// Another Metrics' runs counter makes the second of the two
	// registrations fail, after the first succeeded.
	other, _ := newTestMetrics(t)
	squatter := other.runs
	reg := prometheus.NewRegistry()
	reg.MustRegister(squatter)
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("NewMetrics registered over a conflicting collector")
	}
	if out := scrape(t, reg); strings.Contains(out, "crawlhouse_backfill_pages_total") {
		t.Fatalf("a failed NewMetrics left pages registered:\n%s", out)
	}
	reg.Unregister(squatter)
	if _, err := NewMetrics(reg); err != nil {
		t.Fatalf("second NewMetrics: %v", err)
	}
}

// TestCrawlsGauge: crawlhouse_backfill_crawls{state="waiting"} counts the
// jobs the scheduler waits to reconcile, and drops back to 0 once their
// quiet period is over and they have been reconciled.
func TestCrawlsGauge(t *testing.T) {
	t.Parallel()
	const quiet = 2 * time.Minute
	r := newRig(t, crawlsim.APIOptions{PageDocs: 10})
	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{})
	m, reg := newTestMetrics(t)
	s, _ := runScheduler(t, rec, states, SchedulerConfig{Quiet: quiet, Tick: 10 * time.Millisecond, Now: r.clock.now})
	m.watch(s)

	a, b := r.newCrawl(crawlsim.Options{Pages: 3}), r.newCrawl(crawlsim.Options{Pages: 3})
	a.Finish(crawlapi.StatusCompleted)
	b.Finish(crawlapi.StatusCompleted)
	s.Seen(a.ID, r.clock.now())
	s.Seen(b.ID, r.clock.now())
	s.Seen(a.ID, r.clock.now()) // one job, however many deliveries
	waitPasses(t, s, 3)
	wantSeries(t, reg, `crawlhouse_backfill_crawls{state="waiting"} 2`, `crawlhouse_backfill_crawls{state="running"} 0`)

	r.clock.add(quiet)
	waitState(t, states, a.ID, StateDone)
	waitState(t, states, b.ID, StateDone)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(scrape(t, reg), `crawlhouse_backfill_crawls{state="running"} 0`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	wantSeries(t, reg, `crawlhouse_backfill_crawls{state="waiting"} 0`, `crawlhouse_backfill_crawls{state="running"} 0`)
}
