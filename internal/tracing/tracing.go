// Package tracing is crawlhouse's OpenTelemetry tracing: the tracer
// provider every binary builds from the standard OTEL_* variables, the W3C
// trace context a delivery carries from the sender's request through its
// JetStream message to the sink, and the spans of the pipeline (a delivery
// in the receiver, a batch insert in the sink, a backfill run, an alert)
// and of the read API (one per request).
//
// Tracing is off unless an OTLP endpoint is configured. Off, there is no
// exporter and no goroutine, Setup returns a nil tracer, and every helper
// here takes a nil tracer (or a context without a recording span) as "do
// nothing" without allocating: the receiver's hot path pays a nil check.
//
// Spans never carry a signature, a secret or a delivery's body: only ids,
// sizes, outcomes and status codes.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of crawlhouse's spans.
const Scope = "github.com/crawlhouse/crawlhouse"

// Config is the tracing part of every binary's configuration: the standard
// OpenTelemetry variables, read through the binaries' getenv like every
// other setting (config/environment.md). The exporter itself also reads
// the OTEL_EXPORTER_OTLP_* variables not listed here (headers, timeout,
// compression, certificates) from the process environment.
type Config struct {
	// Disabled turns tracing off whatever else is set.
	Disabled bool `envconfig:"OTEL_SDK_DISABLED" default:"false" desc:"true turns tracing off whatever else is set"`
	// Endpoint is the OTLP base URL; traces go to <Endpoint>/v1/traces
	// over HTTP, or to its host:port over gRPC.
	Endpoint string `envconfig:"OTEL_EXPORTER_OTLP_ENDPOINT" desc:"OTLP collector base URL, e.g. http://otel-collector:4318; setting it (or the traces endpoint) turns tracing on"`
	// TracesEndpoint is the full URL of the traces export; it wins over
	// Endpoint.
	TracesEndpoint string `envconfig:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" desc:"OTLP traces URL, used as is (wins over OTEL_EXPORTER_OTLP_ENDPOINT)"`
	// Protocol is http/protobuf or grpc.
	Protocol string `envconfig:"OTEL_EXPORTER_OTLP_PROTOCOL" default:"http/protobuf" desc:"http/protobuf or grpc"`
	// ServiceName is the service.name resource attribute; empty, the
	// binary's own (crawlhouse-receiver, crawlhouse-sink).
	ServiceName string `envconfig:"OTEL_SERVICE_NAME" desc:"service.name of the spans; default crawlhouse-receiver or crawlhouse-sink"`
	// Sampler and SamplerArg are the standard sampler settings.
	Sampler    string `envconfig:"OTEL_TRACES_SAMPLER" default:"parentbased_always_on" desc:"always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"`
	SamplerArg string `envconfig:"OTEL_TRACES_SAMPLER_ARG" desc:"the ratio of the traceidratio samplers, 0 to 1 (default 1)"`
}

// Enabled reports whether c turns tracing on: an endpoint is set and the
// SDK is not disabled.
func (c Config) Enabled() bool {
	return !c.Disabled && (strings.TrimSpace(c.Endpoint) != "" || strings.TrimSpace(c.TracesEndpoint) != "")
}

// Validate reports settings that could not work, naming the variable. It
// checks nothing when tracing is off.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if _, err := c.exportURL(); err != nil {
		errs = append(errs, err)
	}
	switch c.protocol() {
	case "http/protobuf", "grpc":
	default:
		errs = append(errs, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is neither http/protobuf nor grpc", c.Protocol))
	}
	if _, err := c.sampler(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c Config) protocol() string {
	p := strings.ToLower(strings.TrimSpace(c.Protocol))
	if p == "" {
		return "http/protobuf"
	}
	return p
}

// exportURL is where spans go: the traces endpoint as given, else the base
// endpoint with /v1/traces appended (over HTTP; gRPC takes its host:port).
func (c Config) exportURL() (*url.URL, error) {
	name, raw := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", strings.TrimSpace(c.TracesEndpoint)
	if raw == "" {
		name, raw = "OTEL_EXPORTER_OTLP_ENDPOINT", strings.TrimSpace(c.Endpoint)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url's error repeats the URL, which may hold credentials.
		return nil, fmt.Errorf("%s: not a URL", name)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: want an http:// or https:// URL with a host", name)
	}
	if name == "OTEL_EXPORTER_OTLP_ENDPOINT" && c.protocol() == "http/protobuf" {
		u = u.JoinPath("v1", "traces")
	}
	return u, nil
}

// sampler is OTEL_TRACES_SAMPLER with its argument, as the specification
// defines them; the ratio is clamped to [0, 1].
func (c Config) sampler() (sdktrace.Sampler, error) {
	ratio := 1.0
	if a := strings.TrimSpace(c.SamplerArg); a != "" {
		r, err := strconv.ParseFloat(a, 64)
		if err != nil {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a number", a)
		}
		ratio = min(max(r, 0), 1)
	}
	switch strings.ToLower(strings.TrimSpace(c.Sampler)) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not a known sampler", c.Sampler)
}

// Provider is a binary's tracing: its tracer (nil when tracing is off) and
// the exporter to flush at the end.
type Provider struct {
	tp *sdktrace.TracerProvider
	// Where is the export URL (for the start-up log line; pass it through
	// logs.RedactURL), "" when off.
	Where string
}

// Setup builds the tracer provider c asks for: nil-tracer Provider when
// tracing is off, else an OTLP exporter behind a batch span processor,
// with service.name (c.ServiceName, else service) and service.version.
// Validate first: Setup reports the same errors.
func Setup(ctx context.Context, c Config, service, version string) (*Provider, error) {
	if !c.Enabled() {
		return &Provider{}, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	u, _ := c.exportURL()
	sampler, _ := c.sampler()
	var exp sdktrace.SpanExporter
	var err error
	if c.protocol() == "grpc" {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(u.String()))
	} else {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	name := strings.TrimSpace(c.ServiceName)
	if name == "" {
		name = service
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", name),
		attribute.String("service.version", version),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	return &Provider{tp: tp, Where: u.String()}, nil
}

// HandleErrors sends the SDK's own errors (an export the collector did not
// take) to f instead of the standard library's logger on stderr, so that
// they reach the binary's structured log. It is process-wide, as the SDK's
// handler is: the binaries call it once tracing is on.
func HandleErrors(f func(error)) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(f))
}

// NewProvider wraps a tracer provider built elsewhere (tests: one with an
// in-memory exporter). A nil tp is tracing off.
func NewProvider(tp *sdktrace.TracerProvider) *Provider { return &Provider{tp: tp} }

// Tracer is the tracer of crawlhouse's spans; nil when tracing is off.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil || p.tp == nil {
		return nil
	}
	return p.tp.Tracer(Scope)
}

// Enabled reports whether spans are recorded and exported.
func (p *Provider) Enabled() bool { return p != nil && p.tp != nil }

// Shutdown exports the spans still queued and stops the exporter, waiting
// at most 5 s (a collector that is away does not hold a shutdown).
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return p.tp.Shutdown(ctx)
}
