package reader

import "github.com/prometheus/client_golang/prometheus"

// metrics are the read API's own (docs/operations.md lists them).
type metrics struct {
	requests    *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	exportBytes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
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
	reg.MustRegister(m.requests, m.seconds, m.exportBytes)
	return m
}
