package backfill

import (
	"fmt"
	"io"
	"sort"
	"sync"
)

// Values of the result label of crawlhouse_backfill_pages_total.
const (
	// ResultFetched: a document read from the API.
	ResultFetched = "fetched"
	// ResultInserted: a missing page archived by backfill.
	ResultInserted = "inserted"
	// ResultPresent: a page the archive already held.
	ResultPresent = "present"
	// ResultSkipped: a document without metadata.url or sourceURL.
	ResultSkipped = "skipped"
)

// Metrics are the backfill's Prometheus metrics, written in the text
// exposition format by Write: the module does not carry
// prometheus/client_golang's dependencies, so the sink serves its metrics
// (and these, through its extra-writer hook) by hand. Safe for concurrent
// use.
//
//   - crawlhouse_backfill_pages_total{result} (SPEC §6): documents fetched
//     from the API, inserted, already present, skipped (no URL).
//   - crawlhouse_backfill_runs_total{state}: runs by the state they ended
//     in; state="denied" counts crawls stopped by a 401/403 from the API.
type Metrics struct {
	mu    sync.Mutex
	pages map[string]uint64
	runs  map[string]uint64
}

// NewMetrics returns zeroed metrics; every result and final state is
// present from the start so that rates work before the first event.
func NewMetrics() *Metrics {
	m := &Metrics{pages: map[string]uint64{}, runs: map[string]uint64{}}
	for _, r := range []string{ResultFetched, ResultInserted, ResultPresent, ResultSkipped} {
		m.pages[r] = 0
	}
	for _, s := range []string{StateDone, StateScraping, StateExpired, StateDenied, StateFailed, StatePending} {
		m.runs[s] = 0
	}
	return m
}

func (m *Metrics) addPages(result string, n int) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	m.pages[result] += uint64(n)
	m.mu.Unlock()
}

func (m *Metrics) addRun(state string) {
	m.mu.Lock()
	m.runs[state]++
	m.mu.Unlock()
}

// Pages returns the value of crawlhouse_backfill_pages_total{result}.
func (m *Metrics) Pages(result string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pages[result]
}

// Runs returns the value of crawlhouse_backfill_runs_total{state}.
func (m *Metrics) Runs(state string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[state]
}

// Write writes the metrics in the Prometheus text format 0.0.4.
func (m *Metrics) Write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	family := func(name, help, label string, values map[string]uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		keys := make([]string, 0, len(values))
		for k := range values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%s{%s=%q} %d\n", name, label, k, values[k])
		}
	}
	family("crawlhouse_backfill_pages_total",
		"Documents handled by backfill, by result: fetched from the crawl API, inserted, already present, skipped (no URL).",
		"result", m.pages)
	family("crawlhouse_backfill_runs_total",
		"Backfill runs by the state they ended in; denied counts 401/403 answers of the crawl API.",
		"state", m.runs)
}
