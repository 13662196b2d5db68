package ops

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
