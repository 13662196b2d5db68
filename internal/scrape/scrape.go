// Package scrape builds what a crawlhouse binary serves on /metrics: a
// Prometheus registry of its own, never the global one (several receivers
// and sinks run in one test process), holding the Go runtime and process
// collectors, and the handler that serves it.
package scrape

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry with the Go and process collectors
// registered, for the binary's own metrics, and the /metrics handler that
// serves it (and counts its own scrape errors on it).
func NewRegistry() (*prometheus.Registry, http.Handler) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
