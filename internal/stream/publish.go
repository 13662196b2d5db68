package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrUnavailable is wrapped by every error of Publish: JetStream did not
// confirm that it stored the delivery (down, slow, or refusing it). The
// delivery must not be acknowledged to its sender.
var ErrUnavailable = errors.New("jetstream unavailable")

// Ack is JetStream's confirmation that a delivery is stored.
type Ack struct {
	// Sequence is the delivery's sequence in the stream; for a duplicate,
	// the sequence of the copy stored first.
	Sequence uint64
	// Duplicate is true when a message with the same Nats-Msg-Id (the
	// webhookId) was already stored inside the duplicate window: nothing was
	// stored this time.
	Duplicate bool
}

// headerRoom is what a message's headers may take of the max payload.
const headerRoom = 2048

// Publisher stores delivery envelopes in the events stream. A returned Ack
// means the server stored the message (and, on a server syncing always, put
// it on disk) or already held it: only then may the delivery be
// acknowledged to its sender. A Publisher is safe for concurrent use.
//
// The message form is internal/delivery's: a body that does not fit in one
// message (the server's max payload, 1 MB by default) is compressed, or
// stored aside in the stream's object store (see delivery.Encode).
type Publisher struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	opts   PublisherOptions
	bodies *delivery.Bodies
	acks   *acks

	batcher *batcher

	// lanes are the partitions' publishers when cfg.Partitions > 1: the
	// deliveries go to one of them by job (partition.go). prefix is a
	// partition's subject prefix.
	lanes  []*Publisher
	prefix string
}

// PublisherOptions tune a Publisher.
type PublisherOptions struct {
	// GroupCommit lets concurrent publishes share one atomic batch, and so
	// one fsync on a server that syncs always (see batch.go). The stream
	// must allow atomic publish (EventsStreamConfig does).
	GroupCommit bool
	// MaxBatch bounds the messages of one batch (default 256, at most 1000,
	// the server's limit).
	MaxBatch int
	// MinBatch is the smallest group of waiting publishes sent as an
	// atomic batch (default 16); fewer are published one by one, since the
	// server's per-batch staging store costs more than their fsyncs.
	MinBatch int
	// Writes is the connection's write group (its Options given to
	// Connect): publishes then share their socket writes. nil: each
	// publish is written by nats.go.
	Writes *WriteGroup
}

// NewPublisher returns a Publisher on an open connection. Close releases
// its group-commit goroutine, if any. With cfg.Partitions > 1 it publishes
// each delivery to its job's partition, one publisher (and group commit)
// per partition.
func NewPublisher(nc *nats.Conn, js jetstream.JetStream, cfg Config, opts PublisherOptions) *Publisher {
	if cfg.Partitions > 1 {
		return &Publisher{nc: nc, js: js, lanes: newLanes(nc, js, cfg, opts)}
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	opts.MaxBatch = min(opts.MaxBatch, 1000)
	if opts.MinBatch <= 0 {
		opts.MinBatch = 16
	}
	opts.MinBatch = max(min(opts.MinBatch, opts.MaxBatch), 2)
	p := &Publisher{nc: nc, js: js, opts: opts, bodies: delivery.NewBodies(js, cfg.BodyBucket()), acks: newAcks(nc, opts.Writes)}
	if opts.GroupCommit {
		p.batcher = newBatcher(p)
	}
	return p
}

// Close stops the group-commit goroutine after the batches in flight.
func (p *Publisher) Close() {
	for _, l := range p.lanes {
		l.Close()
	}
	if p.batcher != nil {
		p.batcher.close()
	}
}

// Publish stores env in the stream and waits for the PubAck, at most until
// ctx is done. It may replace env.Body, env.Encoding and env.BodyRef to fit
// the body in a message, and, partitioned, env.Subject with its partition's.
func (p *Publisher) Publish(ctx context.Context, env *delivery.Envelope) (Ack, error) {
	if p.lanes != nil {
		return p.publishToLane(ctx, env)
	}
	if !p.nc.IsConnected() {
		// Answer now rather than buffer: a publish buffered while
		// reconnecting could be stored after the sender was told it was not.
		return Ack{}, fmt.Errorf("%w: not connected (%s)", ErrUnavailable, p.nc.Status())
	}
	msg, err := delivery.Encode(ctx, env, p.MaxBody(), p.bodies)
	if err != nil {
		return Ack{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if p.batcher != nil {
		return p.batcher.publish(ctx, msg)
	}
	return p.publishOne(ctx, msg)
}

// publishOne publishes msg and waits for its PubAck, which comes back on a
// reply subscription kept for reuse (acks.go) instead of a request's
// (inbox, subscription, timer) each: less CPU per delivery
// (docs/benchmarks.md).
func (p *Publisher) publishOne(ctx context.Context, msg *nats.Msg) (Ack, error) {
	return p.acks.publish(ctx, msg)
}

// MaxBody is the largest body carried in a message as it is.
func (p *Publisher) MaxBody() int {
	return int(p.nc.MaxPayload()) - headerRoom
}
