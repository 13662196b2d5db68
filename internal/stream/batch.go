package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Group commit.
//
// A server that syncs always fsyncs once per stored message, so
// plain publishes are bounded by the disk's fsync rate whatever the
// concurrency. nats-server 2.12+ atomic batches are stored together: on a
// single-replica file stream that syncs always, the commit writes every
// message of the batch and then syncs once (stream.go,
// processJetStreamAtomicBatchMsg, "coalesceSync"), and answers with one
// PubAck for the whole batch. The batcher collects the deliveries that
// arrive while earlier batches are in flight into one atomic batch, so
// concurrent deliveries share one fsync.
//
// What it costs (strace of the commit path): the batch's messages share one
// data fsync, but the server stages every atomic batch in a store of its
// own, a directory created and removed per batch with opens, unlinks and
// fsyncs of its own. Batches only form while earlier ones are in flight,
// and one of fewer than MinBatch (16) messages is published message by
// message: at a moderate rate the deliveries then see single fsyncs, faster
// than when every queue formed a batch, and under load they share them. On
// a server that syncs always group commit carries more deliveries than
// publishing them one by one; on a lazy server the staging store costs far
// more than the sync it saves (docs/benchmarks.md has the figures).
// The receiver turns it on by default only for an embedded server that
// syncs always (RECEIVER_GROUP_COMMIT=auto).
//
// Duplicates: Nats-Msg-Id is still checked for every message of an atomic
// batch, but a duplicate fails the whole batch (error 10201, "atomic publish
// batch contains duplicate message id") instead of being reported per
// message. The batcher then publishes that batch's messages one by one:
// each gets its own PubAck, with Duplicate set for the repeated ones. Retries
// are rare (the sender retries after 1, 5 and 15 minutes), so this costs
// little. Fast-ingest batches (allow_batched) skip duplicates silently and
// do not coalesce syncs, so they cannot tell the sender "duplicate" and are
// not used (docs/benchmarks.md has the measurements).

// maxInflightBatches bounds the atomic batches in flight at once; the server
// allows 50 per stream and commits them one at a time.
const maxInflightBatches = 4

type pending struct {
	ctx  context.Context
	msg  *nats.Msg
	done chan result
}

type result struct {
	ack Ack
	err error
}

type batcher struct {
	p       *Publisher
	queue   chan *pending
	slots   chan struct{}
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	// committed counts the atomic batches stored.
	committed atomic.Int64
}

func newBatcher(p *Publisher) *batcher {
	b := &batcher{
		p:       p,
		queue:   make(chan *pending, 4*p.opts.MaxBatch),
		slots:   make(chan struct{}, maxInflightBatches),
		quit:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go b.loop()
	return b
}

// publish queues msg for the next batch and waits for its PubAck.
func (b *batcher) publish(ctx context.Context, msg *nats.Msg) (Ack, error) {
	pd := &pending{ctx: ctx, msg: msg, done: make(chan result, 1)}
	select {
	case b.queue <- pd:
	case <-b.quit:
		return Ack{}, fmt.Errorf("%w: publisher closed", ErrUnavailable)
	case <-ctx.Done():
		return Ack{}, fmt.Errorf("%w: waiting to publish: %w", ErrUnavailable, ctx.Err())
	}
	select {
	case r := <-pd.done:
		return r.ack, r.err
	case <-ctx.Done():
		return Ack{}, fmt.Errorf("%w: waiting for PubAck: %w", ErrUnavailable, ctx.Err())
	}
}

// close stops taking publishes and waits for the batches in flight. A
// publish still queued then fails when its context ends.
func (b *batcher) close() {
	b.once.Do(func() { close(b.quit) })
	<-b.stopped
}

// loop takes a slot, then everything queued (up to MaxBatch), and sends it.
// While all slots are taken, deliveries queue up and form the next batch.
func (b *batcher) loop() {
	defer close(b.stopped)
	defer b.wg.Wait()
	for {
		var first *pending
		select {
		case first = <-b.queue:
		case <-b.quit:
			return
		}
		b.slots <- struct{}{}
		batch := []*pending{first}
	fill:
		for len(batch) < b.p.opts.MaxBatch {
			select {
			case pd := <-b.queue:
				batch = append(batch, pd)
			default:
				break fill
			}
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-b.slots }()
			b.send(batch)
		}()
	}
}

// send stores batch and answers each of its publishes.
func (b *batcher) send(batch []*pending) {
	live := batch[:0]
	for _, pd := range batch {
		if pd.ctx.Err() == nil {
			live = append(live, pd)
		}
	}
	batch = live
	switch {
	case len(batch) == 0:
		return
	case len(batch) == 1:
		ack, err := b.p.publishOne(batch[0].ctx, batch[0].msg)
		batch[0].done <- result{ack, err}
		return
	case len(batch) < b.p.opts.MinBatch:
		// Too few to pay for the batch's staging store: each on its own.
		b.oneByOne(batch)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeLeft(batch))
	defer cancel()
	first, err := b.commit(ctx, batch)
	if err == nil {
		b.committed.Add(1)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// The server refused the batch as a whole (a duplicate inside it,
		// most often): nothing of it was stored. One by one, each message
		// gets its own answer.
		b.oneByOne(batch)
		return
	}
	for i, pd := range batch {
		if err != nil {
			pd.done <- result{err: fmt.Errorf("%w: batch publish: %w", ErrUnavailable, err)}
			continue
		}
		pd.done <- result{ack: Ack{Sequence: first + uint64(i)}}
	}
}

// commit publishes batch as one atomic batch and returns the stream
// sequence of its first message.
func (b *batcher) commit(ctx context.Context, batch []*pending) (uint64, error) {
	id := nuid.Next()
	last := len(batch) - 1
	for i, pd := range batch[:last] {
		pd.msg.Header.Set("Nats-Batch-Id", id)
		pd.msg.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if err := b.p.nc.PublishMsg(pd.msg); err != nil {
			return 0, err
		}
	}
	msg := batch[last].msg
	msg.Header.Set("Nats-Batch-Id", id)
	msg.Header.Set("Nats-Batch-Sequence", strconv.Itoa(last+1))
	msg.Header.Set("Nats-Batch-Commit", "1")
	pa, err := b.p.js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, err
	}
	if pa.Sequence < uint64(last) {
		return 0, fmt.Errorf("batch PubAck sequence %d below batch size %d", pa.Sequence, len(batch))
	}
	return pa.Sequence - uint64(last), nil
}

func (b *batcher) oneByOne(batch []*pending) {
	var wg sync.WaitGroup
	for _, pd := range batch {
		for _, h := range []string{"Nats-Batch-Id", "Nats-Batch-Sequence", "Nats-Batch-Commit"} {
			pd.msg.Header.Del(h)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ack, err := b.p.publishOne(pd.ctx, pd.msg)
			pd.done <- result{ack, err}
		}()
	}
	wg.Wait()
}

// timeLeft is the longest any publish of batch still waits.
func timeLeft(batch []*pending) time.Duration {
	longest := 5 * time.Second
	for i, pd := range batch {
		d, ok := pd.ctx.Deadline()
		if !ok {
			continue
		}
		if left := time.Until(d); i == 0 || left > longest {
			longest = left
		}
	}
	return max(longest, time.Millisecond)
}
