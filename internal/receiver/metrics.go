package receiver

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Delivery outcomes, the values of the outcome label (the ones README.md and
// the chart's alerts name, plus timeout for a body that did not arrive in
// time (RECEIVER_BODY_MIN_RATE, RECEIVER_READ_TIMEOUT), address_limit for
// a 429 to an address past its share of unverified bodies (admission.go),
// evicted for a 429 to a body that arrived slowest of a full pool of
// unverified bodies and made room for another (admission.go),
// and error for an internal 500, which the chart's 5xx alert counts).
const (
	OutcomeAccepted         = "accepted"
	OutcomeDuplicate        = "duplicate"
	OutcomeInvalidSignature = "invalid_signature"
	OutcomeInvalidPayload   = "invalid_payload"
	OutcomeTooLarge         = "too_large"
	OutcomeOverloaded       = "overloaded"
	OutcomeAddressLimit     = "address_limit"
	OutcomeEvicted          = "evicted"
	OutcomeUnavailable      = "unavailable"
	OutcomeTimeout          = "timeout"
	OutcomeError            = "error"
)

var outcomes = []string{OutcomeAccepted, OutcomeDuplicate, OutcomeInvalidSignature,
	OutcomeInvalidPayload, OutcomeTooLarge, OutcomeOverloaded, OutcomeUnavailable,
	OutcomeTimeout, OutcomeAddressLimit, OutcomeEvicted, OutcomeError}

// metrics are the receiver's Prometheus metrics. Each receiver has its own
// registry (no globals: several receivers may run in one test process).
type metrics struct {
	registry *prometheus.Registry
	// deliveries holds one counter per outcome, resolved once so that the
	// hot path does no label lookup.
	deliveries map[string]prometheus.Counter
	publish    prometheus.Histogram
	inflight   prometheus.Gauge
	handler    http.Handler
}

func newMetrics(reg *prometheus.Registry, handler http.Handler, budget *byteBudget, adm *admission) *metrics {
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "crawlhouse_webhook_deliveries_total",
		Help: "Webhook deliveries answered, by outcome.",
	}, []string{"outcome"})
	m := &metrics{
		registry:   reg,
		handler:    handler,
		deliveries: make(map[string]prometheus.Counter, len(outcomes)),
		publish: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "crawlhouse_webhook_publish_seconds",
			Help:    "Time from publishing a delivery to its JetStream PubAck or failure.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "crawlhouse_webhook_inflight",
			Help: "Verified deliveries being stored (bounded by RECEIVER_MAX_INFLIGHT).",
		}),
	}
	// Every outcome is exported from the start, at 0, so that rate() and
	// the alerts see a series before the first event of its kind.
	for _, o := range outcomes {
		m.deliveries[o] = deliveries.WithLabelValues(o)
	}
	inflightBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "crawlhouse_webhook_inflight_bytes",
		Help: "Request-body bytes held by deliveries in progress (bounded by RECEIVER_MAX_INFLIGHT_BYTES).",
	}, func() float64 { return float64(budget.InUse()) })
	unverified := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "crawlhouse_webhook_unverified",
		Help: "Bodies being read before their signature is checked (those of senders not trusted yet bounded by RECEIVER_MAX_UNVERIFIED).",
	}, func() float64 { return float64(adm.Reading()) })
	unverifiedBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "crawlhouse_webhook_unverified_bytes",
		Help: "Request-body bytes held by the unverified bodies of senders not trusted yet (bounded by RECEIVER_MAX_UNVERIFIED_BYTES, within crawlhouse_webhook_inflight_bytes).",
	}, func() float64 { return float64(adm.UnverifiedBytes()) })
	reg.MustRegister(deliveries, m.publish, m.inflight, inflightBytes, unverified, unverifiedBytes)
	return m
}

// delivered counts one answered delivery.
func (m *metrics) delivered(outcome string) {
	if c, ok := m.deliveries[outcome]; ok {
		c.Inc()
	}
}

// ServeHTTP serves the registry in the Prometheus exposition format.
func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }
