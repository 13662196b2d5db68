package tracing

import (
	"context"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// w3c reads and writes the W3C traceparent and tracestate headers.
var w3c = propagation.TraceContext{}

// Attribute keys of crawlhouse's spans (the OpenTelemetry semantic
// conventions' where one exists).
const (
	keyOutcome    = "crawlhouse.outcome"
	keyWebhookID  = "crawlhouse.webhook_id"
	keyCrawlID    = "crawlhouse.crawl_id"
	keyEventType  = "crawlhouse.event_type"
	keyMessages   = "crawlhouse.messages"
	keyAttempts   = "crawlhouse.attempts"
	keyStatusCode = "http.response.status_code"
)

// Deliveries is how the receiver traces webhook requests: its tracer (nil:
// tracing off) and the senders whose trace context it continues.
//
// A request's traceparent and tracestate are the sender's bytes and, until
// its signature is checked, anyone's: they decide nothing before that. The
// span of a request starts only once the request is verified (Verified),
// timed from the request's arrival; a request refused before that (a bad
// signature, a body too large, overloaded) gets its span when it is
// answered. Either way the span starts a new trace, sampled by the local
// sampler alone, unless the request is verified and comes from one of
// TrustedSenders: then it continues the sender's trace (a child of its
// traceparent, which the parent-based samplers follow), with the
// tracestate cut to the W3C limits. So a refused request never carries a
// caller's trace id or tracestate, and at a sampling ratio of 0 a flood of
// them exports nothing.
type Deliveries struct {
	Tracer trace.Tracer
	// TrustedSenders are the client networks whose verified deliveries'
	// trace context is continued (RECEIVER_TRACE_TRUSTED_SENDERS); none
	// by default.
	TrustedSenders []*net.IPNet
}

// DeliverySpan is the tracing of one webhook request in progress; nil when
// tracing is off.
type DeliverySpan struct {
	tracer  trace.Tracer
	trusted []*net.IPNet
	route   string
	start   time.Time
	size    int64
	// span is nil until the request is verified.
	span trace.Span
}

type deliveryKey struct{}

// StartDelivery begins tracing one webhook request. It returns req with
// the request's DeliverySpan in its context, for Verified (req itself when
// tracing is off: that costs nothing), and the DeliverySpan, to end with
// EndDelivery. No span is started yet, and the request's trace headers are
// not read.
func StartDelivery(d Deliveries, req *http.Request, route string) (*http.Request, *DeliverySpan) {
	if d.Tracer == nil {
		return req, nil
	}
	ds := &DeliverySpan{tracer: d.Tracer, trusted: d.TrustedSenders, route: route, start: time.Now(), size: max(req.ContentLength, 0)}
	return req.WithContext(context.WithValue(req.Context(), deliveryKey{}, ds)), ds
}

// Verified starts the span of req once its signature is verified (or, with
// WEBHOOK_ALLOW_UNSIGNED, once it is let through), remote being the
// client's address ("" when the delivery was let through without a
// signature that binds its headers to the body: a shared token, or
// unsigned). The span continues the sender's traceparent only when
// remote is one of the trusted senders and the traceparent is valid (one
// header, W3C format); otherwise it starts a new trace. It returns req with
// the span in its context.
func Verified(req *http.Request, remote string) *http.Request {
	ds, _ := req.Context().Value(deliveryKey{}).(*DeliverySpan)
	if ds == nil || ds.span != nil {
		return req
	}
	ctx := req.Context()
	var parent trace.SpanContext
	if ds.trusts(remote) {
		if tps := req.Header.Values("Traceparent"); len(tps) == 1 {
			parent = remoteContext(tps[0], req.Header.Values("Tracestate")...)
		}
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, ds.span = ds.begin(ctx, parent.IsValid())
	ds.span.AddEvent("signature verified")
	return req.WithContext(ctx)
}

// trusts reports whether the client address remote is a trusted sender.
func (ds *DeliverySpan) trusts(remote string) bool {
	if len(ds.trusted) == 0 {
		return false
	}
	ip := net.ParseIP(remote)
	for _, n := range ds.trusted {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// begin starts the request's server span, timed from its arrival: a child
// of the span context in ctx when continued, else a new trace whatever ctx
// holds.
func (ds *DeliverySpan) begin(ctx context.Context, continued bool) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(ds.start),
		trace.WithAttributes(
			attribute.String("http.request.method", http.MethodPost),
			attribute.String("http.route", ds.route),
			attribute.Int64("http.request.body.size", ds.size),
		),
	}
	if !continued {
		opts = append(opts, trace.WithNewRoot())
	}
	return ds.tracer.Start(ctx, "POST "+ds.route, opts...)
}

// noSpan is the span of tracing off: trace.SpanFromContext of a context
// without one, which records nothing and allocates nothing.
var noSpan = trace.SpanFromContext(context.Background())

// EndDelivery records a delivery's outcome (the receiver's metric label)
// and the status code it was answered, and ends its span: for a request
// refused before it was verified, a span of its own new trace, started at
// the request's arrival. A 5xx is an error; a refusal (4xx) is the
// sender's, not the receiver's.
func EndDelivery(ds *DeliverySpan, outcome string, status int) {
	if ds == nil {
		return
	}
	span := ds.span
	if span == nil {
		_, span = ds.begin(context.Background(), false)
	}
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(keyOutcome, outcome), attribute.Int(keyStatusCode, status))
	if status >= 500 {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// Delivery names the delivery a span is about once its payload is valid.
func Delivery(ctx context.Context, webhookID, crawlID, eventType string, size int) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("payload validated")
	span.SetAttributes(
		attribute.String(keyWebhookID, webhookID),
		attribute.String(keyCrawlID, crawlID),
		attribute.String(keyEventType, eventType),
		attribute.Int("http.request.body.size", size),
	)
}

// Parent is the W3C traceparent and tracestate of the span in ctx, to carry
// in a message; both "" when ctx has none (tracing off).
func Parent(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// FromParent is the span context a message's traceparent and tracestate
// name, invalid (IsValid false) when they are missing or malformed: the
// headers are bytes from the network, read by the W3C rules only, and the
// tracestate is cut to the W3C limits.
func FromParent(traceparent, tracestate string) trace.SpanContext {
	return remoteContext(traceparent, tracestate)
}

// StartPublish starts the span of a delivery's publish to JetStream, a
// child of the delivery's span in ctx; none when that one records nothing.
func StartPublish(ctx context.Context, subject string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, "publish "+subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", subject),
		))
}

// EndPublish records the PubAck (stream sequence, duplicate) or the error
// and ends the publish span.
func EndPublish(span trace.Span, seq uint64, duplicate bool, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "not stored")
	} else {
		span.SetAttributes(attribute.Int64("crawlhouse.stream_sequence", int64(min(seq, 1<<63-1))), attribute.Bool("crawlhouse.duplicate", duplicate))
	}
	span.End()
}

// StartInsert starts the span of one batch insert into ClickHouse, linked
// to the span of every delivery it holds (their traceparents, from the
// messages' headers). When all of them belong to one trace, the insert is
// also a child of the first, so a lone delivery's trace runs from its HTTP
// request to its row. parents yields each message's traceparent and
// tracestate; it is not called when t is nil.
func StartInsert(ctx context.Context, t trace.Tracer, messages int, parents func(yield func(traceparent, tracestate string) bool)) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noSpan
	}
	var links []trace.Link
	oneTrace := true
	for tp, ts := range parents {
		sc := FromParent(tp, ts)
		if !sc.IsValid() {
			continue
		}
		if len(links) > 0 && sc.TraceID() != links[0].SpanContext.TraceID() {
			oneTrace = false
		}
		links = append(links, trace.Link{SpanContext: sc})
	}
	if len(links) > 0 && oneTrace && !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, links[0].SpanContext)
	}
	return t.Start(ctx, "clickhouse insert",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("db.system.name", "clickhouse"),
			attribute.String("db.operation.name", "INSERT"),
			attribute.Int(keyMessages, messages),
		))
}

// InsertFailed records one failed insert attempt of a batch and how the
// sink classed it (unavailable, try later, refused).
func InsertFailed(ctx context.Context, class string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("insert failed", trace.WithAttributes(attribute.String("crawlhouse.error_class", class)))
	}
}

// EndInsert records what became of a batch (committed, bisected, retried,
// handed back), its rows and attempts, and ends its span.
func EndInsert(span trace.Span, outcome string, rows, attempts int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(keyOutcome, outcome), attribute.Int("crawlhouse.rows", rows), attribute.Int(keyAttempts, attempts))
	if outcome != "committed" && outcome != "bisected" {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// Start starts an internal span (a backfill run, an alert) named name about
// one crawl; none when t is nil.
func Start(ctx context.Context, t trace.Tracer, name, crawlID string) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noSpan
	}
	return t.Start(ctx, name, trace.WithAttributes(attribute.String(keyCrawlID, crawlID)))
}

// End records outcome (and err, when set) and ends span.
func End(span trace.Span, outcome string, err error, attrs ...attribute.KeyValue) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(keyOutcome, outcome))
	span.SetAttributes(attrs...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}
