package receiver

import (
	"context"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
)

// tracedPublisher wraps the publisher a Server stores deliveries with in
// their trace, so that the handler does not carry it: the envelope takes
// the delivery span's context (its traceparent and tracestate headers,
// which the sink's spans link to), and the publish is a span of its own,
// a child of the delivery's, ended with the stream sequence or the error.
// Without a recording span in ctx (tracing off) it only publishes.
type tracedPublisher struct{ next Publisher }

var _ Publisher = tracedPublisher{}

func (p tracedPublisher) Publish(ctx context.Context, env *delivery.Envelope) (stream.Ack, error) {
	env.TraceParent, env.TraceState = tracing.Parent(ctx)
	ctx, span := tracing.StartPublish(ctx, env.Subject)
	ack, err := p.next.Publish(ctx, env)
	tracing.EndPublish(span, ack.Sequence, ack.Duplicate, err)
	return ack, err
}
