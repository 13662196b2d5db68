package backfill

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the result label of crawlhouse_backfill_pages_total.
const (
	// ResultFetched: a document read from the API.
	ResultFetched = "fetched"
	// ResultInserted: a missing page archived by backfill.
	ResultInserted = "inserted"
	// ResultPresent: a page the archive already held.
	ResultPresent = "present"
	// ResultSkipped: a document without metadata.url or sourceURL, or an
	// errors endpoint entry without a URL.
	ResultSkipped = "skipped"
	// ResultFailed: a failed scrape the errors endpoint listed and the
	// archive lacked (its webhook was lost), recorded as a failure.
	ResultFailed = "failed"
	// ResultRobotsBlocked: a URL robots.txt blocked, listed by the errors
	// endpoint; recorded apart, never as a failure.
	ResultRobotsBlocked = "robots_blocked"
)

// Metrics are the backfill's Prometheus metrics, registered on the
// Registerer its owner gives (the sink's registry, served on its /metrics).
// Safe for concurrent use.
//
//   - crawlhouse_backfill_pages_total{result}: documents fetched
//     from the API, inserted, already present, skipped (no URL); failed
//     scrapes recorded from the errors endpoint; robots-blocked URLs seen.
//   - crawlhouse_backfill_runs_total{state}: runs by the state they ended
//     in; state="denied" counts crawls stopped by a 401/403 from the API.
//   - crawlhouse_backfill_crawls{state}: the jobs this replica's scheduler
//     holds now: waiting (for their quiet period or due time) or running.
type Metrics struct {
	pages  *prometheus.CounterVec
	runs   *prometheus.CounterVec
	crawls *crawlsCollector
}

// NewMetrics registers the backfill's metrics on reg. Every result and
// final state is exported from the start, at 0, so that rate() and the
// alerts see a series before the first event. On error nothing stays
// registered, so the caller may try again with the same reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("backfill: metrics need a registerer")
	}
	m := &Metrics{
		pages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawlhouse_backfill_pages_total",
			Help: "Documents handled by backfill, by result: fetched from the crawl API, inserted, already present, skipped (no URL), failed (a failed scrape of the errors endpoint recorded), robots_blocked (listed, not a failure).",
		}, []string{"result"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawlhouse_backfill_runs_total",
			Help: "Backfill runs by the state they ended in; denied counts 401/403 answers of the crawl API.",
		}, []string{"state"}),
		crawls: newCrawlsCollector(),
	}
	for _, r := range []string{ResultFetched, ResultInserted, ResultPresent, ResultSkipped, ResultFailed, ResultRobotsBlocked} {
		m.pages.WithLabelValues(r)
	}
	for _, s := range []string{StateDone, StateScraping, StateExpired, StateDenied, StateFailed, StatePending} {
		m.runs.WithLabelValues(s)
	}
	if err := reg.Register(m.pages); err != nil {
		return nil, fmt.Errorf("backfill: register metrics: %w", err)
	}
	if err := reg.Register(m.runs); err != nil {
		reg.Unregister(m.pages)
		return nil, fmt.Errorf("backfill: register metrics: %w", err)
	}
	if err := reg.Register(m.crawls); err != nil {
		reg.Unregister(m.pages)
		reg.Unregister(m.runs)
		return nil, fmt.Errorf("backfill: register metrics: %w", err)
	}
	return m, nil
}

// unregister undoes NewMetrics (a start-up that failed after it).
func (m *Metrics) unregister(reg prometheus.Registerer) {
	reg.Unregister(m.pages)
	reg.Unregister(m.runs)
	reg.Unregister(m.crawls)
}

// watch makes crawlhouse_backfill_crawls report s; until then it reports 0.
func (m *Metrics) watch(s *Scheduler) { m.crawls.sched.Store(s) }

// Values of the state label of crawlhouse_backfill_crawls.
const (
	crawlsWaiting = "waiting"
	crawlsRunning = "running"
)

// crawlsCollector reads the scheduler's maps at scrape time: no counter to
// keep in step with every path that adds or removes a job.
type crawlsCollector struct {
	desc  *prometheus.Desc
	sched atomic.Pointer[Scheduler]
}

func newCrawlsCollector() *crawlsCollector {
	return &crawlsCollector{desc: prometheus.NewDesc("crawlhouse_backfill_crawls",
		"Jobs (crawls and batch scrapes) this replica's backfill scheduler holds, by state: waiting (for their quiet period or due time), running.",
		[]string{"state"}, nil)}
}

func (c *crawlsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *crawlsCollector) Collect(ch chan<- prometheus.Metric) {
	var waiting, running int
	if s := c.sched.Load(); s != nil {
		waiting, running = s.counts()
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(waiting), crawlsWaiting)
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(running), crawlsRunning)
}

// counts is how many jobs wait to be run (seen and not yet quiet, or due
// later; a job may be both) and how many run now.
func (s *Scheduler) counts() (waiting, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.seen {
		if !s.running[id] {
			waiting++
		}
	}
	for id := range s.due {
		if _, seen := s.seen[id]; !seen && !s.running[id] {
			waiting++
		}
	}
	return waiting, len(s.running)
}

func (m *Metrics) addPages(result string, n int) {
	if n == 0 {
		return
	}
	m.pages.WithLabelValues(result).Add(float64(n))
}

func (m *Metrics) addRun(state string) { m.runs.WithLabelValues(state).Inc() }
