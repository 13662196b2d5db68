package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/google/uuid"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP traces endpoint that keeps what it receives.
type collector struct {
	mu       sync.Mutex
	paths    []string
	types    []string
	requests []*coltracepb.ExportTraceServiceRequest
	url      string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.paths = append(c.paths, r.URL.Path)
		c.types = append(c.types, r.Header.Get("Content-Type"))
		c.requests = append(c.requests, req)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// spans lists "service.name/span name" of every span received.
func (c *collector) spans() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, req := range c.requests {
		for _, rs := range req.GetResourceSpans() {
			service := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, service+"/"+s.GetName())
				}
			}
		}
	}
	return out
}

// TestOTLPExporterFromEnvironment: the receiver run with only
// OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME set exports its
// delivery span over OTLP/HTTP protobuf to <endpoint>/v1/traces, flushed at
// shutdown.
func TestOTLPExporterFromEnvironment(t *testing.T) {
	col := newCollector(t)
	env := map[string]string{
		"RECEIVER_LISTEN":             "127.0.0.1:0",
		"WEBHOOK_ALLOW_UNSIGNED":      "true",
		"NATS_URL":                    streamtest.Start(t),
		"LOG_LEVEL":                   "warn",
		"OTEL_EXPORTER_OTLP_ENDPOINT": col.url,
		"OTEL_SERVICE_NAME":           "receiver-under-test",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan receivercmd.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- receivercmd.RunWithOptions(ctx, []string{"receiver"}, func(k string) string { return env[k] }, io.Discard, io.Discard,
			receivercmd.Options{Ready: func(a receivercmd.Addrs) { ready <- a }})
	}()
	var addrs receivercmd.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("receiver exited: %v", err)
	}
	url := "http://" + addrs.HTTP + "/webhooks/crawl"
	body := pageBody(uuid.NewString(), uuid.NewString(), "page")
	waitFor(t, "the delivery stored", func() bool {
		resp, err := http.Post(url, "application/json", strings.NewReader(string(body)))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("receiver: %v", err)
	}

	got := col.spans()
	if !contains(got, "receiver-under-test/POST /webhooks/crawl") || !contains(got, "receiver-under-test/publish crawl.events.crawl.page") {
		t.Errorf("collector received spans %v; want the delivery and publish spans of receiver-under-test", got)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for i, p := range col.paths {
		if p != "/v1/traces" || col.types[i] != "application/x-protobuf" {
			t.Errorf("export %d went to %s as %s, want /v1/traces as application/x-protobuf", i, p, col.types[i])
		}
	}
}

// TestTracesEndpointUsedAsIs: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the
// full URL (no /v1/traces appended) and wins over the base endpoint; the
// service name defaults to the binary's.
func TestTracesEndpointUsedAsIs(t *testing.T) {
	col := newCollector(t)
	p, err := tracing.Setup(context.Background(), tracing.Config{
		Endpoint:       "http://127.0.0.1:9/not-here",
		TracesEndpoint: col.url + "/custom/traces",
	}, "crawlhouse-sink", "test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Start(context.Background(), p.Tracer(), "backfill run", uuid.NewString())
	tracing.End(span, "done", nil)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := col.spans(); !contains(got, "crawlhouse-sink/backfill run") {
		t.Errorf("collector received %v, want crawlhouse-sink/backfill run", got)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.paths) == 0 || col.paths[0] != "/custom/traces" {
		t.Errorf("exports went to %v, want /custom/traces", col.paths)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
