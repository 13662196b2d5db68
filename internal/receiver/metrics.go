package receiver

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
)

// Delivery outcomes, the values of the outcome label (SPEC §6).
const (
	outcomeAccepted         = "accepted"
	outcomeDuplicate        = "duplicate"
	outcomeInvalidSignature = "invalid_signature"
	outcomeInvalidPayload   = "invalid_payload"
	outcomeTooLarge         = "too_large"
	outcomeOverloaded       = "overloaded"
	outcomeUnavailable      = "unavailable"
)

var outcomes = []string{outcomeAccepted, outcomeDuplicate, outcomeInvalidSignature,
	outcomeInvalidPayload, outcomeTooLarge, outcomeOverloaded, outcomeUnavailable}

// metrics are the receiver's Prometheus metrics, per receiver (no globals:
// several receivers may run in one test process).
//
// They are written in the Prometheus text format by hand: the module's
// go.sum does not (yet) hold prometheus/client_golang's dependencies, and
// three metrics do not need it. The names and types are SPEC §6's.
type metrics struct {
	deliveries map[string]*atomic.Uint64 // by outcome, fixed set
	publish    *histogram
	inflight   atomic.Int64
}

func newMetrics() *metrics {
	m := &metrics{deliveries: make(map[string]*atomic.Uint64), publish: newHistogram(0.0002, 2, 16)}
	for _, o := range outcomes {
		m.deliveries[o] = new(atomic.Uint64)
	}
	return m
}

func (m *metrics) delivered(outcome string) {
	if c, ok := m.deliveries[outcome]; ok {
		c.Add(1)
	}
}

// ServeHTTP writes the metrics in the Prometheus text format 0.0.4.
func (m *metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.write(w)
}

func (m *metrics) write(w io.Writer) {
	fmt.Fprintln(w, "# HELP crawlhouse_webhook_deliveries_total Webhook deliveries answered, by outcome.")
	fmt.Fprintln(w, "# TYPE crawlhouse_webhook_deliveries_total counter")
	names := append([]string(nil), outcomes...)
	sort.Strings(names)
	for _, o := range names {
		fmt.Fprintf(w, "crawlhouse_webhook_deliveries_total{outcome=%q} %d\n", o, m.deliveries[o].Load())
	}
	fmt.Fprintln(w, "# HELP crawlhouse_webhook_publish_seconds Time from publishing a delivery to its JetStream PubAck or failure.")
	fmt.Fprintln(w, "# TYPE crawlhouse_webhook_publish_seconds histogram")
	m.publish.write(w, "crawlhouse_webhook_publish_seconds")
	fmt.Fprintln(w, "# HELP crawlhouse_webhook_inflight Deliveries in progress (bounded by RECEIVER_MAX_INFLIGHT).")
	fmt.Fprintln(w, "# TYPE crawlhouse_webhook_inflight gauge")
	fmt.Fprintf(w, "crawlhouse_webhook_inflight %d\n", m.inflight.Load())
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
