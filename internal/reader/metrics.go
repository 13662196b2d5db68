package reader

import "github.com/prometheus/client_golang/prometheus"

// metrics are the read API's own (docs/operations.md lists them).
type metrics struct {
	requests    *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	exportBytes *prometheus.CounterVec
}

// newMetrics registers them, and the requests and exports in progress:
// inflight's and exports' slots taken.
func newMetrics(reg prometheus.Registerer, inflight, exports chan struct{}) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawlhouse_reader_requests_total",
			Help: "Requests of the read API by route and status code.",
		}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "crawlhouse_reader_request_duration_seconds",
			Help:    "Time to answer a request of the read API, by route (an export: until its last byte).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120, 600},
		}, []string{"route"}),
		exportBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawlhouse_reader_export_bytes_total",
			Help: "Bytes of exports streamed, by format.",
		}, []string{"format"}),
	}
	inProgress := func(name, help string, slots chan struct{}) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(len(slots)) })
	}
	reg.MustRegister(m.requests, m.seconds, m.exportBytes,
		inProgress("crawlhouse_reader_requests_in_flight", "Requests of the read API and the web pages in progress (at most READER_MAX_INFLIGHT).", inflight),
		inProgress("crawlhouse_reader_exports_in_flight", "Exports in progress (at most READER_MAX_EXPORTS).", exports))
	return m
}
