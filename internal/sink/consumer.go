// Package sink is the crawlhouse sink's pipeline: it fetches the deliveries
// the receiver stored in JetStream, decodes them into rows, inserts them in
// ClickHouse in batches, and answers each message (ack, nak with a delay,
// or dead letter), then tells its observers what was committed. The
// command line, configuration and start-up are internal/sinkcmd's; the
// message form is internal/delivery's.
package sink

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// BatchWriter commits the rows of a batch; *archive.Store is one. Ping
// tells an insert that fails because of its data from a server that does
// not answer. PriorFailures tells new failed pages from failures already
// recorded (a delivery replayed after the stream's duplicate window).
type BatchWriter interface {
	Insert(ctx context.Context, rows archive.Rows) error
	Ping(ctx context.Context) error
	PriorFailures(ctx context.Context, fs []archive.Failure) ([]archive.Prior, error)
}

var _ BatchWriter = (*archive.Store)(nil)

const (
	// DefaultBatchBytes is SINK_BATCH_BYTES's default: the most delivery
	// bytes one insert takes (docs/benchmarks.md, "Sink": the shape of
	// inserts).
	DefaultBatchBytes = 16 << 20
	// DefaultAckWait is how long JetStream waits for an ack before it hands
	// a message to another consumer instance. The sink keeps the batch in
	// hand alive with InProgress every ackWait/3, so a slow insert does not
	// cause a redelivery; a crashed sink's messages return after it.
	DefaultAckWait = 30 * time.Second
	// insertTimeout bounds one insert attempt.
	insertTimeout = 2 * time.Minute
)

var (
	// nakBackoff is the redelivery delay of a message tried n times: 1 s,
	// 2 s, 4 s … 1 min.
	nakBackoff = backoff.Exponential{First: time.Second, Max: time.Minute}
	// holdBackoff is the wait between insert attempts while ClickHouse is
	// unavailable: 1 s doubling to 30 s.
	holdBackoff = backoff.Exponential{First: time.Second, Max: 30 * time.Second}
)

// Config tunes the pipeline.
type Config struct {
	// Durable is the durable pull consumer every sink replica shares
	// (SINK_CONSUMER).
	Durable string
	// FilterSubject selects the deliveries: every event type under the
	// events stream's subject prefix.
	FilterSubject string
	// BatchSize is the most messages one fetch, and so one insert, takes
	// (SINK_BATCH_SIZE). Validate states the bounds of this and the
	// settings below.
	BatchSize int
	// BatchBytes is the most delivery bytes one insert takes
	// (SINK_BATCH_BYTES). It also bounds one
	// fetch, as stored (fetchBytes), and the batches in hand together hold
	// at most twice it (see Run).
	BatchBytes int
	// BatchWait is the longest wait to fill a batch (SINK_BATCH_WAIT).
	BatchWait time.Duration
	// MaxDeliver is how many deliveries a message ClickHouse refuses gets
	// before it is dead-lettered (SINK_MAX_DELIVER).
	MaxDeliver int
	// AckWait is the consumer's ack wait; 0 means DefaultAckWait.
	AckWait time.Duration
	// InsertsInFlight is how many batches may be inserting at once
	// (SINK_INSERTS_IN_FLIGHT); 1 is one after the other.
	InsertsInFlight int
}

func (c Config) insertsInFlight() int { return max(c.InsertsInFlight, 1) }

func (c Config) batchBytes() int {
	if c.BatchBytes > 0 {
		return c.BatchBytes
	}
	return DefaultBatchBytes
}

// minFetchBytes is the least a fetch may take, as stored: more than any
// one message (NATS's max_payload; 1 MB by default), or a fetch bounded
// below it would return nothing for ever.
const minFetchBytes = 16 << 20

// fetchBytes bounds one fetch, as stored: SINK_BATCH_BYTES, but never
// below minFetchBytes (chunk then cuts the fetch into batches).
func (c Config) fetchBytes() int { return max(c.batchBytes(), minFetchBytes) }

func (c Config) ackWait() time.Duration {
	if c.AckWait > 0 {
		return c.AckWait
	}
	return DefaultAckWait
}

// ConsumerConfig is the JetStream consumer every sink replica creates or
// updates to the same settings.
func (c Config) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       c.Durable,
		Description:   "crawlhouse sink: deliveries into ClickHouse",
		FilterSubject: c.FilterSubject,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.ackWait(),
		MaxDeliver:    -1,
		// Room for several replicas each holding its batches in flight
		// and the one it decodes.
		MaxAckPending: max(c.BatchSize*(c.insertsInFlight()+1)*4, 10000),
	}
}

// Deps are what a Consumer works with; all are required but Observers.
type Deps struct {
	// Source is the durable consumer (Config.ConsumerConfig) batches are
	// fetched from.
	Source jetstream.Consumer
	// Bodies reads the bodies stored aside; DeadLetters takes what cannot be
	// archived.
	Bodies      *delivery.Bodies
	DeadLetters *delivery.DeadLetters
	// Writer is ClickHouse.
	Writer BatchWriter
	// Observers are told of every committed delivery.
	Observers []Observer
	// Metrics and Stall are what /metrics and /readyz report; they exist
	// before the Consumer does (see NewMetrics, NewStall).
	Metrics *Metrics
	Stall   *Stall
	Log     zerolog.Logger
	// Tracer, when set, traces each batch insert (internal/tracing).
	Tracer trace.Tracer
}

// Consumer moves deliveries from the events stream into ClickHouse.
//
// Delivery contract, as implemented by Run and commit:
//
//   - Fetch: up to SINK_BATCH_SIZE messages (and at most SINK_BATCH_BYTES
//     as stored) from the durable pull consumer SINK_CONSUMER, waiting at
//     most SINK_BATCH_WAIT: a trickle is inserted SINK_BATCH_WAIT after it
//     is fetched for, whatever the batch size. Replicas share the consumer,
//     so each message goes to one of them. A fetch is cut into batches of
//     at most SINK_BATCH_BYTES of delivery bytes (as received, uncompressed),
//     each inserted on its own (memory stays bounded by bytes, whatever the
//     page size; docs/benchmarks.md states the RSS).
//   - Decode: envelope headers, body (decompressed, or read from the object
//     store: delivery.Decode and delivery.Bodies), the event, rows. A message that can never be decoded
//     (no Nats-Msg-Id, a malformed header, a body that is not a valid event)
//     is dead-lettered at once with the reason and then acked: retrying
//     cannot fix it. A body that cannot be read now (object store
//     unavailable) is nak'ed with the backoff below and counts as a try.
//   - Insert: the rows of every decoded message go in one insert per table
//     (pages, failures, crawl_events, events, monitor_pages). Messages are acked only after the
//     inserts returned without error. Up to SINK_INSERTS_IN_FLIGHT batches,
//     and at most twice SINK_BATCH_BYTES of deliveries, insert at once;
//     each is acked after its own inserts, and everything below applies to
//     each batch on its own (a failing batch is held,
//     bisected or nak'ed alone). The observers, though, are told of the
//     batches in the order they were fetched (see Run). A sink that dies before acking leaves
//     its messages unacked: JetStream redelivers them after the ack wait and
//     the repeated insert collapses under FINAL (the tables' keys), so
//     nothing is lost and nothing shows twice.
//   - ClickHouse unavailable (archive.Classify: Unavailable — unreachable,
//     read-only, too many parts, schema not migrated, or refusing the
//     sink's credentials or privileges: a rotated password or a revoked
//     grant is an operator's fix, never the data's fault): the batch is held,
//     not nak'ed. The insert is retried in process with backoff (1 s
//     doubling to 30 s) while InProgress keeps the messages assigned to this
//     sink, and nothing more is fetched once SINK_INSERTS_IN_FLIGHT batches
//     are in hand (the others in flight finish, or are held the same way
//     when ClickHouse is down for them too). An outage of any length therefore
//     never uses up tries or dead-letters anything. While a batch is held
//     the sink is "stalled": crawlhouse_sink_stalled is 1,
//     crawlhouse_sink_stalled_seconds counts, /readyz answers 503 with the
//     reason, and the stall's start and end are logged. If the sink is
//     stopped meanwhile, the batch is nak'ed without delay for whichever
//     sink runs next.
//   - ClickHouse answering "try later" (archive.TryLater: memory limit,
//     timeout, or no answer at all): held the same way while ClickHouse
//     does not answer a ping. Once the batch has failed 3 times in a row
//     while ClickHouse answered, it is bisected: each half is inserted on
//     its own and a half that fails again while ClickHouse answers is split
//     further, so the rest is archived and the culprit ends alone. A message
//     failing alone is treated as a rejected one (below) and remembered as
//     a suspect: when it is delivered again it is inserted on its own after
//     the rest of its batch, so it holds nothing else up. Its tries are its
//     deliveries (NumDelivered, kept by JetStream across sink restarts).
//   - ClickHouse rejecting the data (archive.Classify: Refused): the batch is
//     bisected the same way, at once, to find the culprits; the others are
//     acked. A message that fails alone is nak'ed with delay
//     1 s × 2^(tries-1), at most 1 min, and once it has been delivered
//     SINK_MAX_DELIVER times it is published to the dead-letter stream
//     SINK_DLQ_STREAM with the error, and acked when that publish is
//     confirmed. If the dead-letter publish fails the message is nak'ed
//     instead: it is never dropped.
//   - Dead letters: every one is logged (webhook id, crawl id, subject,
//     tries, reason) and counted. A body stored aside in the object store
//     is copied into the dead letters' own object store, which does not
//     expire, before the dead letter is published; a redrive copies it back
//     (delivery.DeadLetters).
//   - Replays: before the insert, the archive is asked which failures of
//     the batch it already holds from before they were received
//     (archive.PriorFailures). A failure of a delivery recorded earlier (a
//     captured delivery replayed after the duplicate window) is not
//     inserted again; one whose crawl and URL failed earlier is inserted
//     but is no new failed page. Only new ones count and alert.
//   - Observers: after the acks, each committed delivery is counted and told
//     to every Observer (the alerter, the backfill scheduler).
//   - Shutdown: the batches in hand are finished (inserted and acked, or
//     nak'ed) before Run returns.
//
// The consumer's own MaxDeliver is unlimited: the server never drops a
// message silently; the sink decides when a message is dead.
type Consumer struct {
	cfg       Config
	src       jetstream.Consumer
	w         BatchWriter
	dlq       *delivery.DeadLetters
	bodies    *delivery.Bodies
	observers []Observer
	m         *Metrics
	log       zerolog.Logger
	// stall is the held batches, if any (metrics and /readyz read it).
	stall *Stall
	// suspects are the stream sequences of messages that failed alone while
	// ClickHouse answered (see suspect).
	suspectsMu sync.Mutex
	suspects   map[uint64]bool
	// settled holds the messages of the batches in hand already acked or
	// nak'ed (see settle).
	settled sync.Map
	// sleep waits between insert attempts (tests replace it).
	sleep func(ctx context.Context, d time.Duration)
	// tracer is nil when tracing is off.
	tracer trace.Tracer
}

// NewConsumer returns a Consumer, or an error naming a missing dependency
// or a setting that cannot work.
func NewConsumer(cfg Config, d Deps) (*Consumer, error) {
	var errs []error
	if d.Source == nil || d.Bodies == nil || d.DeadLetters == nil || d.Writer == nil || d.Metrics == nil || d.Stall == nil {
		errs = append(errs, errors.New("sink: the source, bodies, dead letters, writer, metrics and stall are all required"))
	}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Consumer{
		cfg: cfg, src: d.Source, w: d.Writer, dlq: d.DeadLetters, bodies: d.Bodies, observers: d.Observers,
		m: d.Metrics, log: d.Log, stall: d.Stall, suspects: make(map[uint64]bool), sleep: sleep,
		tracer: d.Tracer,
	}, nil
}

// Run consumes until ctx is done, then returns after the batches in hand.
//
// Fetching and decoding run one batch ahead of inserting, and up to
// SINK_INSERTS_IN_FLIGHT batches insert at once: while ClickHouse takes
// batch n, batch n+1 is fetched, decoded and inserted, so the sink's work
// and ClickHouse's per-insert waits overlap. Each batch is acked as soon as
// its own rows are committed (and nak'ed alone when they are not), but
// what batches were fetched in one order is settled in that order:
//
//   - the observers are told of a batch only after every earlier batch is
//     committed (or handed back) and its observers were told, so a
//     crawl.completed is never seen before the pages fetched ahead of it;
//   - a batch with failed pages asks the archive which failures it holds
//     (newFailures) only after every earlier batch is done, so a failure
//     delivered twice in two batches in flight counts once.
//
// At most SINK_INSERTS_IN_FLIGHT decoded batches, and twice
// SINK_BATCH_BYTES of deliveries (bytesInHand), are in hand, plus the one
// decoded next: three times SINK_BATCH_BYTES in all, and the rest of its
// fetch (fetchBytes as stored) when SINK_BATCH_BYTES is below 16 MiB.
func (c *Consumer) Run(ctx context.Context) {
	// Finishing the batches in hand must not be cut short by shutdown.
	work := context.WithoutCancel(ctx)
	batches := make(chan *batch)
	go func() {
		defer close(batches)
		for ctx.Err() == nil {
			msgs, err := c.fetch()
			if err != nil {
				c.log.Warn().Err(err).Msg("fetch from JetStream failed; retrying")
				sleep(ctx, time.Second)
				continue
			}
			if len(msgs) == 0 {
				continue
			}
			stop := c.keepAlive(msgs)
			chunks := chunk(msgs, c.cfg.batchBytes())
			for i, ch := range chunks {
				b := &batch{deliveries: c.decodeAll(work, ch.msgs), bytes: ch.bytes}
				if i == len(chunks)-1 {
					b.done = stop
				}
				batches <- b
			}
		}
	}()
	hand := newInHand(c.cfg.insertsInFlight(), c.cfg.bytesInHand(), c.cfg.batchBytes())
	var inFlight sync.WaitGroup
	// prev is closed once the batch before the next one is settled.
	prev := make(chan struct{})
	close(prev)
	for {
		// Room first, so that the batch decoded ahead waits in the
		// fetching goroutine rather than here while another is decoded.
		hand.room()
		b, ok := <-batches
		if !ok {
			break
		}
		hand.take(b.bytes)
		b.prev, b.settled = prev, make(chan struct{})
		prev = b.settled
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			c.commitInTurn(ctx, work, b)
			hand.give(b.bytes)
		}()
	}
	inFlight.Wait()
}

// bytesInHand bounds the delivery bytes (as chunk counts them) of the
// batches inserting at once: two full batches, one committing while the
// next is decoded and sent, so that memory is bounded by
// SINK_BATCH_BYTES, not by SINK_BATCH_SIZE × the page size; smaller
// batches (a trickle, or SINK_BATCH_SIZE reached first) reach
// SINK_INSERTS_IN_FLIGHT first (docs/benchmarks.md).
func (c Config) bytesInHand() int { return 2 * c.batchBytes() }

// inHand counts the batches in flight and their bytes; take waits while
// one more would pass either bound (a batch alone always passes).
type inHand struct {
	batches, bytes int // the bounds
	// full is the bytes of the largest batch (SINK_BATCH_BYTES): room
	// waits until one that size would fit.
	full int

	mu   sync.Mutex
	free *sync.Cond
	n    int
	size int
}

func newInHand(batches, bytes, full int) *inHand {
	h := &inHand{batches: batches, bytes: bytes, full: full}
	h.free = sync.NewCond(&h.mu)
	return h
}

// room waits until fewer batches than the bound are in flight, and a full
// batch would fit in the bytes: until then the next batch, decoded, waits
// in the fetching goroutine, and nothing more is fetched or decoded, so
// that at most one batch beyond the bounds is in memory.
func (h *inHand) room() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.n >= h.batches || (h.n > 0 && h.size+h.full > h.bytes) {
		h.free.Wait()
	}
}

func (h *inHand) take(bytes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.n > 0 && (h.n >= h.batches || h.size+bytes > h.bytes) {
		h.free.Wait()
	}
	h.n++
	h.size += bytes
}

func (h *inHand) give(bytes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n--
	h.size -= bytes
	h.free.Broadcast()
}

// commitInTurn commits b, then settles it in its turn (after the batch
// fetched before it): tells the observers and ends the keep-alive.
func (c *Consumer) commitInTurn(ctx, work context.Context, b *batch) {
	if b.hasFailures() {
		<-b.prev
	}
	if len(b.deliveries) > 0 {
		c.commit(ctx, work, b)
	}
	<-b.prev
	for _, committed := range b.observed {
		for _, o := range c.observers {
			o.Observe(committed)
		}
	}
	if b.done != nil {
		b.done()
	}
	close(b.settled)
}

// batch is a set of decoded deliveries committed together; done, when set,
// ends the keep-alive of the fetch it came from.
type batch struct {
	deliveries []*decoded
	// bytes are its delivery bytes, as chunk counts them.
	bytes int
	done  func()
	// observed is what the observers are told once the batch is settled:
	// its committed deliveries.
	observed []Committed
	// prev is closed when the batch fetched before this one is settled;
	// settled when this one is.
	prev, settled chan struct{}
}

// hasFailures reports whether a delivery of b carries failed pages.
func (b *batch) hasFailures() bool {
	for _, d := range b.deliveries {
		if len(d.rows.Failures) > 0 {
			return true
		}
	}
	return false
}

// chunk splits msgs into runs of at most limit delivery bytes (at least one
// message each).
func chunk(msgs []jetstream.Msg, limit int) []run {
	var out []run
	start, size := 0, 0
	for i, m := range msgs {
		n := delivery.Size(m.Headers(), m.Data())
		if i > start && size+n > limit {
			out = append(out, run{msgs[start:i], size})
			start, size = i, 0
		}
		size += n
	}
	return append(out, run{msgs[start:], size})
}

// run is messages of a fetch and their delivery bytes.
type run struct {
	msgs  []jetstream.Msg
	bytes int
}

func (c *Consumer) fetch() ([]jetstream.Msg, error) {
	b, err := c.src.Fetch(c.cfg.BatchSize, jetstream.FetchMaxWait(c.cfg.BatchWait), jetstream.FetchMaxBytes(c.cfg.fetchBytes()))
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrMaxBytesExceeded) {
		c.log.Debug().Err(err).Int("messages", len(msgs)).Msg("fetch ended early")
	}
	c.setPending(msgs)
	return msgs, nil
}

// setPending sets crawlhouse_sink_consumer_pending after a fetch. The count
// comes free with every message: its metadata carries the consumer's
// NumPending as the server delivered it, so the last message of a fetch
// tells how many were still waiting; an empty fetch means none were (for
// this consumer, whose other deliveries are in other replicas' hands).
// Asking the server (Consumer.Info) would cost a round trip per fetch.
// While a batch is held (ClickHouse away) nothing is fetched and the gauge
// keeps its last value; the NATS exporter's jetstream_consumer_num_pending
// sees the backlog grow meanwhile.
func (c *Consumer) setPending(msgs []jetstream.Msg) {
	if len(msgs) == 0 {
		c.m.pending.Set(0)
		return
	}
	if md, err := msgs[len(msgs)-1].Metadata(); err == nil {
		c.m.pending.Set(float64(md.NumPending))
	}
}

// keepAlive tells JetStream every ackWait/3 that the batch is still being
// worked on, until the returned stop is called.
func (c *Consumer) keepAlive(msgs []jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.cfg.ackWait() / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, m := range msgs {
					if _, answered := c.settled.Load(m); !answered {
						_ = m.InProgress()
					}
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		for _, m := range msgs {
			c.settled.Delete(m)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) { _ = backoff.Sleep(ctx, d) }
