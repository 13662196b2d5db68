package tracing

import (
	"context"
	"net/http"

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

// StartDelivery starts the span of one webhook delivery, continuing the
// sender's traceparent when it sent a valid one. It returns req with the
// span in its context (req itself when t is nil: tracing off costs
// nothing) and the span, to end with EndDelivery.
func StartDelivery(t trace.Tracer, req *http.Request, route string) (*http.Request, trace.Span) {
	if t == nil {
		return req, noSpan
	}
	ctx := w3c.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	ctx, span := t.Start(ctx, "POST "+route,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", http.MethodPost),
			attribute.String("http.route", route),
			attribute.Int64("http.request.body.size", max(req.ContentLength, 0)),
		))
	return req.WithContext(ctx), span
}

// noSpan is the span of tracing off: trace.SpanFromContext of a context
// without one, which records nothing and allocates nothing.
var noSpan = trace.SpanFromContext(context.Background())

// EndDelivery records a delivery's outcome (the receiver's metric label)
// and the status code it was answered, and ends its span. A 5xx is an
// error; a refusal (4xx) is the sender's, not the receiver's.
func EndDelivery(span trace.Span, outcome string, status int) {
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

// Event adds a named event (a step passed) to the span in ctx.
func Event(ctx context.Context, name string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(name)
	}
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
// headers are the sender's bytes, parsed by the W3C rules only.
func FromParent(traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		c["tracestate"] = tracestate
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), c))
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
