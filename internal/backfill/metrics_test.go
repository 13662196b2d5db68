package backfill

import (
	"strings"
	"testing"

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
