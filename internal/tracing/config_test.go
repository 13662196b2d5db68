package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestOffWhenUnset: without an endpoint, or with OTEL_SDK_DISABLED=true,
// Setup starts nothing and its tracer is nil (every helper's "off").
func TestOffWhenUnset(t *testing.T) {
	for _, c := range []Config{
		{},
		{ServiceName: "x", Sampler: "always_on"},
		{Endpoint: "http://collector:4318", Disabled: true},
		{TracesEndpoint: "http://collector:4318/v1/traces", Disabled: true},
	} {
		p, err := Setup(context.Background(), c, "crawlhouse-receiver", "test")
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if p.Enabled() || p.Tracer() != nil || p.Where != "" {
			t.Errorf("%+v: tracing on (tracer %v, where %q), want off", c, p.Tracer(), p.Where)
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("%+v: shutdown: %v", c, err)
		}
	}
	var nilProvider *Provider
	if nilProvider.Tracer() != nil || nilProvider.Enabled() {
		t.Error("a nil Provider is not off")
	}
}

// TestValidate names the variable at fault and never repeats a URL.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Endpoint: "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{Config{Endpoint: "ftp://user:hunter2@collector"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{Config{TracesEndpoint: "http://"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{Config{Endpoint: "http://c:4318", Protocol: "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{Config{Endpoint: "http://c:4318", Sampler: "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{Config{Endpoint: "http://c:4318", Sampler: "traceidratio", SamplerArg: "half"}, "OTEL_TRACES_SAMPLER_ARG"},
	} {
		err := tc.c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", tc.c, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error repeats a credential: %v", err)
		}
		if _, err := Setup(context.Background(), tc.c, "s", "v"); err == nil {
			t.Errorf("%+v: Setup accepted what Validate refuses", tc.c)
		}
	}
	// Off, nothing else is looked at.
	if err := (Config{Sampler: "sometimes", Protocol: "carrier pigeon"}).Validate(); err != nil {
		t.Errorf("tracing off, Validate: %v", err)
	}
	for _, ok := range []Config{
		{Endpoint: "http://c:4318"},
		{Endpoint: "https://c", Protocol: "grpc", Sampler: "parentbased_traceidratio", SamplerArg: "0.25"},
		{TracesEndpoint: "http://c:4318/v1/traces", Sampler: "traceidratio", SamplerArg: "7"},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// TestExportURL: the base endpoint gets /v1/traces over HTTP (after any
// path it has), the traces endpoint is used as is.
func TestExportURL(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Endpoint: "http://collector:4318"}, "http://collector:4318/v1/traces"},
		{Config{Endpoint: "https://otel.example/prefix/"}, "https://otel.example/prefix/v1/traces"},
		{Config{Endpoint: "http://collector:4317", Protocol: "grpc"}, "http://collector:4317"},
		{Config{Endpoint: "http://a:4318", TracesEndpoint: "http://b:4318/custom"}, "http://b:4318/custom"},
	} {
		u, err := tc.c.exportURL()
		if err != nil || u.String() != tc.want {
			t.Errorf("%+v: %v %v, want %s", tc.c, u, err, tc.want)
		}
	}
}

// TestSampler: the standard names, a ratio clamped to [0, 1], and a parent
// sampled by the sender honoured by the parent-based default.
func TestSampler(t *testing.T) {
	for _, tc := range []struct {
		name, arg string
		want      string
	}{
		{"", "", "ParentBased{root:AlwaysOnSampler"},
		{"always_off", "", "AlwaysOffSampler"},
		{"traceidratio", "7", "TraceIDRatioBased{1}"},
		{"traceidratio", "-1", "TraceIDRatioBased{0}"},
		{"parentbased_traceidratio", "0.5", "ParentBased{root:TraceIDRatioBased{0.5}"},
	} {
		s, err := Config{Sampler: tc.name, SamplerArg: tc.arg}.sampler()
		if err != nil || !strings.HasPrefix(s.Description(), tc.want) {
			t.Errorf("%s %s: %v %v, want %s", tc.name, tc.arg, s, err, tc.want)
		}
	}
}

// TestOffAllocatesNothing: with tracing off, the calls the receiver makes
// for each delivery allocate nothing.
func TestOffAllocatesNothing(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/webhooks/crawl", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	allocs := testing.AllocsPerRun(1000, func() {
		r, span := StartDelivery(Deliveries{TrustedSenders: loopback}, req, "/webhooks/crawl")
		r = Verified(r, "127.0.0.1")
		ctx := r.Context()
		Delivery(ctx, "w", "c", "crawl.page", 10)
		tp, ts := Parent(ctx)
		if tp != "" || ts != "" || r != req {
			t.Fatal("tracing off changed the request or made a trace context")
		}
		pctx, pspan := StartPublish(ctx, "crawl.events.crawl.page")
		_ = pctx
		EndPublish(pspan, 1, false, nil)
		EndDelivery(span, "accepted", http.StatusOK)
	})
	if allocs != 0 {
		t.Errorf("tracing off: %v allocations per delivery, want 0", allocs)
	}
}

// TestInsertParent: a batch of one trace's deliveries is a child of the
// first and linked to each; a batch of several traces is a root linked to
// each; a malformed traceparent (hostile headers) is skipped.
func TestInsertParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer(Scope)
	const a1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const a2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01"
	const b1 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	seq := func(tps ...string) func(func(string, string) bool) {
		return func(yield func(string, string) bool) {
			for _, p := range tps {
				if !yield(p, "") {
					return
				}
			}
		}
	}
	_, s := StartInsert(context.Background(), tr, 3, seq(a1, "00-zz-garbage", a2))
	EndInsert(s, "committed", 3, 1)
	_, s = StartInsert(context.Background(), tr, 2, seq(a1, b1))
	EndInsert(s, "committed", 2, 1)
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	one, two := spans[0], spans[1]
	if one.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || one.Parent.SpanID().String() != "00f067aa0ba902b7" || len(one.Links) != 2 {
		t.Errorf("one-trace batch: parent %v, %d links; want the first delivery, 2 links", one.Parent, len(one.Links))
	}
	if two.Parent.IsValid() || len(two.Links) != 2 {
		t.Errorf("two-trace batch: parent %v, %d links; want a root with 2 links", two.Parent, len(two.Links))
	}
	// Off: parents is never read.
	_, s = StartInsert(context.Background(), nil, 1, func(func(string, string) bool) { t.Error("parents read with tracing off") })
	if s.IsRecording() || s.SpanContext().IsValid() {
		t.Error("tracing off made a span")
	}
	var _ trace.Span = s
}

// BenchmarkDeliverySpans is the tracing work of one delivery in the
// receiver, off (no endpoint: the nil tracer) and on (spans recorded,
// exported nowhere): what tracing costs per delivery.
func BenchmarkDeliverySpans(b *testing.B) {
	req := httptest.NewRequest(http.MethodPost, "/webhooks/crawl", nil)
	run := func(b *testing.B, tr trace.Tracer) {
		b.ReportAllocs()
		for b.Loop() {
			r, span := StartDelivery(Deliveries{Tracer: tr}, req, "/webhooks/crawl")
			r = Verified(r, "127.0.0.1")
			ctx := r.Context()
			Delivery(ctx, "w", "c", "crawl.page", 10)
			_, _ = Parent(ctx)
			_, pspan := StartPublish(ctx, "crawl.events.crawl.page")
			EndPublish(pspan, 1, false, nil)
			EndDelivery(span, "accepted", http.StatusOK)
		}
	}
	b.Run("off", func(b *testing.B) { run(b, nil) })
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider()
		defer tp.Shutdown(context.Background())
		run(b, tp.Tracer(Scope))
	})
}

// TestGRPCProtocol: OTEL_EXPORTER_OTLP_PROTOCOL=grpc builds the gRPC
// exporter to the endpoint's host:port; a collector that is not there does
// not fail the start (spans are exported in the background).
func TestGRPCProtocol(t *testing.T) {
	p, err := Setup(context.Background(), Config{Endpoint: "http://127.0.0.1:1", Protocol: "grpc"}, "crawlhouse-receiver", "test")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() || p.Tracer() == nil || p.Where != "http://127.0.0.1:1" {
		t.Errorf("grpc: enabled %v, where %q", p.Enabled(), p.Where)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown with nothing to export: %v", err)
	}
}
