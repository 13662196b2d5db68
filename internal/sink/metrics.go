package sink

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tables are the values of the table label of
// crawlhouse_sink_rows_inserted_total.
var tables = []string{"pages", "failures", "crawl_events", "events", "monitor_pages"}

// Metrics are the pipeline's Prometheus metrics (crawlhouse_sink_* and
// crawlhouse_page_failures_total), registered on the registry the sink
// serves; no globals, since several sinks run in one test process.
type Metrics struct {
	// rows holds one counter per table, resolved once so that a commit does
	// no label lookup.
	rows   map[string]prometheus.Counter
	insert prometheus.Histogram
	// latency is delivery-to-row: from the receiver taking a delivery to
	// the commit of its rows.
	latency     prometheus.Histogram
	deadLetters prometheus.Counter
	failures    prometheus.Counter
	naks        prometheus.Counter
	batches     prometheus.Counter
	// pending is the durable consumer's NumPending as of the last fetch
	// (see Consumer.fetch).
	pending prometheus.Gauge
}

// NewMetrics registers the pipeline's metrics on reg; st is the stall they
// report. Every series exists from the start, at 0, so that rate() and the
// alerts see it before the first insert.
func NewMetrics(reg prometheus.Registerer, st *Stall) (*Metrics, error) {
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "crawlhouse_sink_rows_inserted_total",
		Help: "Rows committed to ClickHouse, by table.",
	}, []string{"table"})
	m := &Metrics{
		rows: make(map[string]prometheus.Counter, len(tables)),
		insert: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "crawlhouse_sink_insert_seconds",
			Help:    "Time of one batch's ClickHouse inserts, successful or not.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "crawlhouse_sink_delivery_latency_seconds",
			Help: "Time from the receiver taking a delivery to the commit of its rows in ClickHouse, one observation per archived delivery.",
			// 50 ms to about 5 h: a healthy pipeline answers in the first
			// buckets (SINK_BATCH_WAIT plus an insert), a backlog drained after
			// an outage in the last.
			Buckets: prometheus.ExponentialBuckets(0.05, 2.5, 15),
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawlhouse_sink_dead_letters_total",
			Help: "Messages moved to the dead-letter stream.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawlhouse_page_failures_total",
			Help: "New failed pages archived: once per crawl and URL, however late a delivery of the same failure comes again; cancelled pages not counted.",
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
	for _, t := range tables {
		m.rows[t] = rows.WithLabelValues(t)
	}
	stalled := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "crawlhouse_sink_stalled",
		Help: "1 while a batch is held because ClickHouse does not take it (nothing else is archived meanwhile), else 0.",
	}, st.stalled)
	stalledFor := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "crawlhouse_sink_stalled_seconds",
		Help: "Seconds the batch in hand has been held without a successful insert, 0 when none is held.",
	}, st.seconds)
	for _, c := range []prometheus.Collector{rows, m.insert, m.latency, m.deadLetters, m.failures, m.naks, m.batches, m.pending, stalled, stalledFor} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("sink metrics: %w", err)
		}
	}
	return m, nil
}

// observeLatency records d's delivery-to-row latency, committed at now. The
// start is the receiver's Crawlhouse-Received-At, else the time JetStream
// stored the message (a message published by another tool); a start in the
// future (another host's clock) counts as 0.
func (m *Metrics) observeLatency(d *decoded, now time.Time) {
	start := d.env.ReceivedAt
	if start.IsZero() {
		md, err := d.msg.Metadata()
		if err != nil {
			return
		}
		start = md.Timestamp
	}
	m.latency.Observe(max(now.Sub(start), 0).Seconds())
}
