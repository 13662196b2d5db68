package sink

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
)

// metrics are the sink's Prometheus metrics (SPEC §6), per sink: no globals,
// several sinks run in one test process. They are written in the text format
// by hand, as the receiver's are: the module does not carry
// prometheus/client_golang's dependencies.
type metrics struct {
	rows        map[string]*atomic.Uint64 // by table
	insert      *histogram
	deadLetters atomic.Uint64
	failures    atomic.Uint64
	naks        atomic.Uint64
	batches     atomic.Uint64
	alerts      func() uint64
	// extra writes metrics of other parts (the backfill's).
	extra []func(io.Writer)
}

var tables = []string{"pages", "failures", "crawl_events"}

func newMetrics() *metrics {
	m := &metrics{rows: map[string]*atomic.Uint64{}, insert: newHistogram(0.001, 2, 16), alerts: func() uint64 { return 0 }}
	for _, t := range tables {
		m.rows[t] = new(atomic.Uint64)
	}
	return m
}

// ServeHTTP writes the metrics in the Prometheus text format 0.0.4.
func (m *metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.write(w)
}

func (m *metrics) write(w io.Writer) {
	fmt.Fprintln(w, "# HELP crawlhouse_sink_rows_inserted_total Rows committed to ClickHouse, by table.")
	fmt.Fprintln(w, "# TYPE crawlhouse_sink_rows_inserted_total counter")
	names := append([]string(nil), tables...)
	sort.Strings(names)
	for _, t := range names {
		fmt.Fprintf(w, "crawlhouse_sink_rows_inserted_total{table=%q} %d\n", t, m.rows[t].Load())
	}
	fmt.Fprintln(w, "# HELP crawlhouse_sink_insert_seconds Time of one batch's ClickHouse inserts, successful or not.")
	fmt.Fprintln(w, "# TYPE crawlhouse_sink_insert_seconds histogram")
	m.insert.write(w, "crawlhouse_sink_insert_seconds")
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	counter("crawlhouse_sink_dead_letters_total", "Messages moved to the dead-letter stream.", m.deadLetters.Load())
	counter("crawlhouse_page_failures_total", "Failed pages archived (rows of the failures table).", m.failures.Load())
	counter("crawlhouse_alerts_total", "Alerts raised for crawls whose failures reached the threshold.", m.alerts())
	counter("crawlhouse_sink_naks_total", "Messages handed back to JetStream for a later try.", m.naks.Load())
	counter("crawlhouse_sink_batches_total", "Batches committed to ClickHouse.", m.batches.Load())
	for _, e := range m.extra {
		e(w)
	}
}

// histogram is a Prometheus histogram with exponential buckets.
type histogram struct {
	bounds []float64
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; last is +Inf
	sum    float64
	count  uint64
}

func newHistogram(start, factor float64, n int) *histogram {
	h := &histogram{bounds: make([]float64, n), counts: make([]uint64, n+1)}
	for i := range h.bounds {
		h.bounds[i] = start * math.Pow(factor, float64(i))
	}
	return h
}

func (h *histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

func (h *histogram) write(w io.Writer, name string) {
	h.mu.Lock()
	counts, sum, count := append([]uint64(nil), h.counts...), h.sum, h.count
	h.mu.Unlock()
	var cum uint64
	for i, b := range h.bounds {
		cum += counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", name, b, cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n", name, count)
	fmt.Fprintf(w, "%s_sum %g\n%s_count %d\n", name, sum, name, count)
}
