package readercmd_test

import (
	"net/http"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/readercmd"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestRequestSpans: each request is a span named by its route, with the
// job of the path and the status it was answered.
func TestRequestSpans(t *testing.T) {
	t.Parallel()
	s := seed(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	base := startReaderWith(t, s.cfg, nil, readercmd.Options{Tracing: tracing.NewProvider(tp)})
	var j struct{}
	getJSON(t, base+"/v1/jobs/"+s.jobA, http.StatusOK, &j)
	getJSON(t, base+"/v1/jobs/not-a-job", http.StatusBadRequest, &j)
	got := map[string]string{}
	for _, sp := range spans.GetSpans() {
		attrs := map[string]string{}
		for _, a := range sp.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		got[attrs["crawlhouse.crawl_id"]+" "+attrs["http.response.status_code"]] = sp.Name
	}
	if got[s.jobA+" 200"] != "GET /v1/jobs/:id" || got[" 400"] != "GET /v1/jobs/:id" {
		t.Fatalf("spans %v", got)
	}
}
