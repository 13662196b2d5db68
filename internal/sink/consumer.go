package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// BatchWriter commits the rows of a batch; *archive.Writer is one. Ping
// tells an insert that fails because of its data from a server that does
// not answer.
type BatchWriter interface {
	Insert(ctx context.Context, rows archive.Rows) error
	Ping(ctx context.Context) error
}

var _ BatchWriter = (*archive.Writer)(nil)

// Observer is told about every delivery once its batch is committed (the
// backfill uses it to see crawls going quiet or completing). It must not
// block.
type Observer interface {
	Observe(crawlID, eventType string, at time.Time)
}

const (
	// batchBytes bounds the bytes of one fetch (as stored: compressed
	// bodies count compressed), so that a batch of large pages does not hold
	// SINK_BATCH_SIZE × 1 MB in memory.
	batchBytes = 16 << 20
	// defaultAckWait is how long JetStream waits for an ack before it hands
	// a message to another consumer instance. The sink keeps the batch in
	// hand alive with InProgress every ackWait/3, so a slow insert does not
	// cause a redelivery; a crashed sink's messages return after it.
	defaultAckWait = 30 * time.Second
	// insertTimeout bounds one insert attempt.
	insertTimeout = 2 * time.Minute
	// maxNakDelay caps the backoff of a rejected message.
	maxNakDelay = time.Minute
	// maxHoldDelay caps the wait between insert attempts while ClickHouse is
	// unavailable.
	maxHoldDelay = 30 * time.Second
)

// Consumer moves deliveries from the events stream into ClickHouse.
//
// Delivery contract, as implemented by run and commit:
//
//   - Fetch: up to SINK_BATCH_SIZE messages (and at most 16 MB as stored)
//     from the durable pull consumer SINK_CONSUMER, waiting at most
//     SINK_BATCH_WAIT. Replicas share the consumer, so each message goes to
//     one of them. A fetch of large pages is cut into batches of at most 8 MB
//     of delivery bytes, each inserted on its own (memory stays bounded:
//     about 250 MB RSS with 1 MB pages, docs/benchmarks.md).
//   - Decode: envelope headers, body (decompressed, or read from the object
//     store), the event, rows. A message that can never be decoded
//     (no Nats-Msg-Id, a malformed header, a body that is not a valid event)
//     is dead-lettered at once with the reason and then acked: retrying
//     cannot fix it. A body that cannot be read now (object store
//     unavailable) is nak'ed with the backoff below and counts as a try.
//   - Insert: the rows of every decoded message go in one insert per table
//     (pages, failures, crawl_events). Messages are acked only after the
//     inserts returned without error. A sink that dies before acking leaves
//     its messages unacked: JetStream redelivers them after the ack wait and
//     the repeated insert collapses under FINAL (the tables' keys), so
//     nothing is lost and nothing shows twice.
//   - ClickHouse unavailable (archive.Classify: Unavailable — unreachable,
//     read-only, too many parts, schema not migrated, or refusing the
//     sink's credentials or privileges: a rotated password or a revoked
//     grant is an operator's fix, never the data's fault): the batch is held,
//     not nak'ed. The insert is retried in process with backoff (1 s
//     doubling to 30 s) while InProgress keeps the messages assigned to this
//     sink, and nothing more is fetched. An outage of any length therefore
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
//     expire, before the dead letter is published; Redrive copies it back.
//   - Shutdown: the batch in hand is finished (inserted and acked, or
//     nak'ed) before run returns.
//
// The consumer's own MaxDeliver is unlimited: the server never drops a
// message silently; the sink decides when a message is dead.
type Consumer struct {
	cfg     Config
	js      jetstream.JetStream
	w       BatchWriter
	dlq     *delivery.DeadLetters
	bodies  *delivery.Bodies
	alerts  *alert.Alerter
	observe Observer
	m       *metrics
	log     zerolog.Logger
	ackWait time.Duration
	// stall is the held batch, if any (metrics and /readyz read it).
	stall *stall
	// suspects are the stream sequences of messages that failed alone while
	// ClickHouse answered; only the commit goroutine uses it.
	suspects map[uint64]bool
	// settled holds the messages of the batches in hand already acked or
	// nak'ed (see settle).
	settled sync.Map
	// sleep waits between insert attempts (tests replace it).
	sleep func(ctx context.Context, d time.Duration)

	// crashAfterInsert, when set (tests), is called after a batch is
	// inserted and before it is acked; returning true abandons the batch as
	// a crash would.
	crashAfterInsert func() bool
}

// newConsumer returns a Consumer; st is the stall its metrics and readiness
// report.
func newConsumer(cfg Config, js jetstream.JetStream, w BatchWriter, alerts *alert.Alerter, observe Observer,
	m *metrics, st *stall, log zerolog.Logger, ackWait time.Duration) (*Consumer, error) {
	dlq, err := delivery.NewDeadLetters(js, deadLetterConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &Consumer{
		cfg: cfg, js: js, w: w, dlq: dlq, bodies: delivery.NewBodies(js, cfg.BodyBucket()), alerts: alerts, observe: observe,
		m: m, log: log, ackWait: ackWait, stall: st, suspects: make(map[uint64]bool), sleep: sleep,
	}, nil
}

// ConsumerConfig is the JetStream consumer every sink replica creates or
// updates to the same settings.
func ConsumerConfig(cfg Config, ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		Description:   "crawlhouse sink: deliveries into ClickHouse",
		FilterSubject: cfg.SubjectPrefix + ".>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		// Room for several replicas each holding a full batch.
		MaxAckPending: max(cfg.BatchSize*16, 10000),
	}
}

// decoded is one message of a batch, decoded.
type decoded struct {
	msg   jetstream.Msg
	tries uint64
	// seq is the message's sequence in the events stream.
	seq  uint64
	env  *delivery.Envelope
	rows archive.Rows
	// failed counts its failed pages (not those a cancellation left
	// unscraped): after commit they count in crawlhouse_page_failures_total
	// and wake the alerter.
	failed int
}

// run consumes until ctx is done, then returns after the batch in hand.
//
// Fetching and decoding run one batch ahead of inserting: while ClickHouse
// takes batch n, batch n+1 is fetched and decoded, so the sink's CPU work
// overlaps ClickHouse's. At most two decoded batches are in memory.
func (c *Consumer) run(ctx context.Context, cons jetstream.Consumer) error {
	// Finishing the batches in hand must not be cut short by shutdown.
	work := context.WithoutCancel(ctx)
	batches := make(chan *batch)
	go func() {
		defer close(batches)
		for ctx.Err() == nil {
			msgs, err := c.fetch(cons)
			if err != nil {
				c.log.Warn().Err(err).Msg("fetch from JetStream failed; retrying")
				sleep(ctx, time.Second)
				continue
			}
			if len(msgs) == 0 {
				continue
			}
			stop := c.keepAlive(msgs)
			chunks := chunk(msgs, chunkBytes)
			for i, ch := range chunks {
				b := &batch{deliveries: c.decodeAll(work, ch)}
				if i == len(chunks)-1 {
					b.done = stop
				}
				batches <- b
			}
		}
	}()
	for b := range batches {
		if len(b.deliveries) > 0 {
			c.commit(ctx, work, b.deliveries)
		}
		if b.done != nil {
			b.done()
		}
	}
	return nil
}

// batch is a set of decoded deliveries committed together; done, when set,
// ends the keep-alive of the fetch it came from.
type batch struct {
	deliveries []*decoded
	done       func()
}

// chunkBytes bounds the delivery bytes (as received, uncompressed) decoded
// and inserted together: a fetch of large pages is split so that memory
// stays bounded (docs/benchmarks.md states the RSS with 1 MB pages). 8 MB
// is still a large insert for ClickHouse; with pages of a few kB the
// SINK_BATCH_SIZE limit comes first.
const chunkBytes = 8 << 20

// chunk splits msgs into runs of at most limit body bytes (at least one
// message each).
func chunk(msgs []jetstream.Msg, limit int) [][]jetstream.Msg {
	var out [][]jetstream.Msg
	start, size := 0, 0
	for i, m := range msgs {
		n := delivery.Size(m.Headers(), m.Data())
		if i > start && size+n > limit {
			out = append(out, msgs[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(out, msgs[start:])
}

func (c *Consumer) fetch(cons jetstream.Consumer) ([]jetstream.Msg, error) {
	b, err := cons.Fetch(c.cfg.BatchSize, jetstream.FetchMaxWait(c.cfg.BatchWait), jetstream.FetchMaxBytes(batchBytes))
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

// decodeAll decodes msgs; the undecodable are dead-lettered or nak'ed here
// and left out.
func (c *Consumer) decodeAll(ctx context.Context, msgs []jetstream.Msg) []*decoded {
	var ok []*decoded
	for _, m := range msgs {
		d, err := c.decode(ctx, m)
		switch {
		case err == nil:
			ok = append(ok, d)
		case errors.Is(err, errPermanent):
			c.deadLetter(ctx, m, err)
		default:
			c.nak(m, err)
		}
	}
	return ok
}

// errPermanent marks a message that can never be decoded.
var errPermanent = errors.New("undecodable message")

// decode reads a message into rows.
func (c *Consumer) decode(ctx context.Context, m jetstream.Msg) (*decoded, error) {
	d := &decoded{msg: m, tries: 1}
	md, err := m.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", errPermanent, err)
	}
	d.tries, d.seq = md.NumDelivered, md.Sequence.Stream
	env, err := delivery.Decode(m.Subject(), m.Headers(), m.Data())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPermanent, err)
	}
	if env.ReceivedAt.IsZero() {
		env.ReceivedAt = md.Timestamp
	}
	d.env = env
	body, err := c.bodies.Open(ctx, env)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("%w: %v", errPermanent, err)
		}
		return nil, err
	}
	ev, err := decodeEvent(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPermanent, err)
	}
	if env.CrawlID == "" {
		env.CrawlID = ev.ID
	}
	if env.Type == "" {
		env.Type = ev.Type
	}
	d.rows, err = archive.EventRows(ev, body, env.ReceivedAt)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPermanent, err)
	}
	for _, f := range d.rows.Failures {
		// A page its cancelled job never scraped is no outage.
		if f.Reason != events.ReasonCancelled {
			d.failed++
		}
	}
	return d, nil
}

// decodeEvent parses a delivery. The receiver validated it (events.Validate)
// before storing it, so the sink does not run the full validation again (it
// would parse each body twice more); events.DecodeAccepted decodes leniently,
// so that every delivery the receiver acknowledged is archived, and checks
// the type; archive.EventRows checks the ids.
func decodeEvent(body []byte) (*events.Event, error) {
	return events.DecodeAccepted(body)
}

// keepAlive tells JetStream every ackWait/3 that the batch is still being
// worked on, until the returned stop is called.
func (c *Consumer) keepAlive(msgs []jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.ackWait / 3)
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

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
