package sink

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// tables are the values of the table label of
// crawlhouse_sink_rows_inserted_total.
var tables = []string{"pages", "failures", "crawl_events"}

// metrics are the sink's Prometheus metrics. Each sink has its own
// registry (no globals: several sinks run in one test process); the backfill
// registers its crawlhouse_backfill_* on it too (NewBackfiller).
type metrics struct {
	registry *prometheus.Registry
	// rows holds one counter per table, resolved once so that a commit does
	// no label lookup.
	rows        map[string]prometheus.Counter
	insert      prometheus.Histogram
	deadLetters prometheus.Counter
	failures    prometheus.Counter
	naks        prometheus.Counter
	batches     prometheus.Counter
	// pending is the durable consumer's NumPending as of the last fetch
	// (see Consumer.fetch).
	pending prometheus.Gauge
	handler http.Handler
}

// newMetrics registers the sink's metrics on a registry of its own; alerts
// reports the alerts raised so far (crawlhouse_alerts_total is the
// alerter's count, read at scrape time), st the consumer's stall.
func newMetrics(alerts func() uint64, st *stall) *metrics {
	reg := prometheus.NewRegistry()
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "crawlhouse_sink_rows_inserted_total",
		Help: "Rows committed to ClickHouse, by table.",
	}, []string{"table"})
	m := &metrics{
		registry: reg,
		rows:     make(map[string]prometheus.Counter, len(tables)),
		insert: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "crawlhouse_sink_insert_seconds",
			Help:    "Time of one batch's ClickHouse inserts, successful or not.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawlhouse_sink_dead_letters_total",
			Help: "Messages moved to the dead-letter stream.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawlhouse_page_failures_total",
			Help: "Failed pages archived (rows of the failures table).",
		}),
		naks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawlhouse_sink_naks_total",
			Help: "Messages handed back to JetStream for a later try.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawlhouse_sink_batches_total",
			Help: "Batches committed to ClickHouse.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "crawlhouse_sink_consumer_pending",
			Help: "Messages of the stream the sink's durable consumer has not delivered yet, as of the last fetch.",
		}),
	}
	// Every table is exported from the start, at 0, so that rate() and the
	// alerts see a series before the first insert.
	for _, t := range tables {
		m.rows[t] = rows.WithLabelValues(t)
	}
	raised := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "crawlhouse_alerts_total",
		Help: "Alerts raised for crawls whose failures reached the threshold.",
	}, func() float64 { return float64(alerts()) })
	stalled := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "crawlhouse_sink_stalled",
		Help: "1 while a batch is held because ClickHouse does not take it (nothing else is archived meanwhile), else 0.",
	}, st.stalled)
	stalledFor := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "crawlhouse_sink_stalled_seconds",
		Help: "Seconds the batch in hand has been held without a successful insert, 0 when none is held.",
	}, st.seconds)
	reg.MustRegister(rows, m.insert, m.deadLetters, m.failures, m.naks, m.batches, m.pending, raised, stalled, stalledFor,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return m
}

// ServeHTTP serves the registry in the Prometheus exposition format.
func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }
