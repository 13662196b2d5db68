package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// BatchWriter commits the rows of a batch; *archive.Writer is one.
type BatchWriter interface {
	Insert(ctx context.Context, rows archive.Rows) error
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
// Delivery contract (SPEC §2), as implemented by run and commit:
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
//   - ClickHouse unreachable or answering "not now" (archive.Rejected is
//     false): the batch is held, not nak'ed. The insert is retried in
//     process with backoff (1 s doubling to 30 s) while InProgress keeps the
//     messages assigned to this sink, and nothing more is fetched. An outage
//     of any length therefore never uses up tries or dead-letters anything.
//     If the sink is stopped meanwhile, the batch is nak'ed without delay
//     for whichever sink runs next.
//   - ClickHouse rejecting the data (archive.Rejected): each message of the
//     batch is inserted alone to find the culprits; the others are acked. A
//     rejected message is nak'ed with delay 1 s × 2^(tries-1), at most 1 min,
//     and once it has been delivered SINK_MAX_DELIVER times it is published
//     to the dead-letter stream SINK_DLQ_STREAM with the error, and acked
//     when that publish is confirmed. If the dead-letter publish fails the
//     message is nak'ed instead: it is never dropped.
//   - Shutdown: the batch in hand is finished (inserted and acked, or
//     nak'ed) before run returns.
//
// The consumer's own MaxDeliver is unlimited: the server never drops a
// message silently; the sink decides when a message is dead.
type Consumer struct {
	cfg     Config
	js      jetstream.JetStream
	w       BatchWriter
	dlq     *deadLetters
	alerts  *alert.Alerter
	observe Observer
	m       *metrics
	log     zerolog.Logger
	ackWait time.Duration

	// crashAfterInsert, when set (tests), is called after a batch is
	// inserted and before it is acked; returning true abandons the batch as
	// a crash would.
	crashAfterInsert func() bool
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

// delivery is one message in a batch, decoded.
type delivery struct {
	msg   jetstream.Msg
	tries uint64
	env   *events.Envelope
	rows  archive.Rows
	// failures are the failed pages, for alerting after commit.
	failures []alert.Failure
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
	deliveries []*delivery
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
		n := len(m.Data())
		if s, err := strconv.Atoi(m.Headers().Get(events.HeaderBodySize)); err == nil && s > n {
			n = s
		}
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
func (c *Consumer) decodeAll(ctx context.Context, msgs []jetstream.Msg) []*delivery {
	var ok []*delivery
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

// commit inserts the batch, holding it while ClickHouse is unavailable and
// isolating the culprits when ClickHouse rejects it.
func (c *Consumer) commit(ctx, work context.Context, ds []*delivery) {
	var rows archive.Rows
	for _, d := range ds {
		rows.Add(d.rows)
	}
	delay := time.Second
	for {
		err := c.insert(work, rows)
		if err == nil {
			c.committed(work, ds, rows)
			return
		}
		if archive.Rejected(err) {
			if len(ds) == 1 {
				c.rejected(work, ds[0], err)
				return
			}
			c.log.Warn().Err(err).Int("messages", len(ds)).Msg("ClickHouse rejected a batch; inserting its messages one by one")
			for _, d := range ds {
				c.commit(ctx, work, []*delivery{d})
			}
			return
		}
		if ctx.Err() != nil {
			c.log.Warn().Err(err).Int("messages", len(ds)).Msg("ClickHouse unavailable at shutdown; batch handed back to JetStream")
			for _, d := range ds {
				c.nakDelay(d.msg, 0)
			}
			return
		}
		c.log.Warn().Err(err).Int("messages", len(ds)).Dur("retry_in", delay).Msg("ClickHouse unavailable; holding the batch")
		sleep(ctx, delay)
		delay = min(delay*2, maxHoldDelay)
	}
}

func (c *Consumer) insert(ctx context.Context, rows archive.Rows) error {
	ctx, cancel := context.WithTimeout(ctx, insertTimeout)
	defer cancel()
	start := time.Now()
	err := c.w.Insert(ctx, rows)
	c.m.insert.Observe(time.Since(start).Seconds())
	return err
}

// committed acks a batch whose rows are in ClickHouse, then counts, alerts
// and tells the observer.
func (c *Consumer) committed(ctx context.Context, ds []*delivery, rows archive.Rows) {
	if c.crashAfterInsert != nil && c.crashAfterInsert() {
		return
	}
	for _, d := range ds {
		if err := d.msg.Ack(); err != nil {
			// The rows are in; a redelivery inserts them again, harmlessly.
			c.log.Warn().Err(err).Str("webhook_id", d.env.WebhookID).Msg("ack failed; the message will be redelivered")
		}
	}
	c.m.batches.Inc()
	c.m.rows["pages"].Add(float64(len(rows.Pages)))
	c.m.rows["failures"].Add(float64(len(rows.Failures)))
	c.m.rows["crawl_events"].Add(float64(len(rows.CrawlEvents)))
	c.m.failures.Add(float64(len(rows.Failures)))
	for _, d := range ds {
		for _, f := range d.failures {
			c.alerts.Failure(f)
		}
		if c.observe != nil {
			c.observe.Observe(d.env.CrawlID, d.env.Type, d.env.ReceivedAt)
		}
	}
	c.log.Debug().Int("messages", len(ds)).Int("pages", len(rows.Pages)).Msg("batch committed")
}

// rejected handles a message ClickHouse refused on its own.
func (c *Consumer) rejected(ctx context.Context, d *delivery, err error) {
	log := c.log.With().Str("webhook_id", d.env.WebhookID).Str("crawl_id", d.env.CrawlID).Uint64("tries", d.tries).Logger()
	if d.tries >= uint64(c.cfg.MaxDeliver) {
		log.Error().Err(err).Msg("ClickHouse rejected the message; moving it to the dead-letter stream")
		c.deadLetter(ctx, d.msg, err)
		return
	}
	delay := nakDelay(d.tries)
	log.Warn().Err(err).Dur("retry_in", delay).Msg("ClickHouse rejected the message")
	c.nakDelay(d.msg, delay)
}

// nakDelay is the backoff of a message tried n times: 1 s, 2 s, 4 s … 1 min.
func nakDelay(n uint64) time.Duration {
	if n < 1 {
		n = 1
	}
	if n > 7 {
		return maxNakDelay
	}
	return min(time.Second<<(n-1), maxNakDelay)
}

// nak hands a message back after a transient failure before insert.
func (c *Consumer) nak(m jetstream.Msg, err error) {
	var tries uint64 = 1
	if md, e := m.Metadata(); e == nil {
		tries = md.NumDelivered
	}
	if tries >= uint64(c.cfg.MaxDeliver) {
		c.deadLetter(context.Background(), m, err)
		return
	}
	delay := nakDelay(tries)
	c.log.Warn().Err(err).Str("subject", m.Subject()).Dur("retry_in", delay).Msg("message not readable now")
	c.nakDelay(m, delay)
}

func (c *Consumer) nakDelay(m jetstream.Msg, d time.Duration) {
	c.m.naks.Inc()
	var err error
	if d > 0 {
		err = m.NakWithDelay(d)
	} else {
		err = m.Nak()
	}
	if err != nil {
		c.log.Warn().Err(err).Msg("nak failed; the message returns after the ack wait")
	}
}

// deadLetter publishes m to the dead-letter stream with the reason and acks
// it; if the publish fails, m is nak'ed so that it is tried again.
func (c *Consumer) deadLetter(ctx context.Context, m jetstream.Msg, reason error) {
	if err := c.dlq.publish(ctx, m, reason); err != nil {
		c.log.Error().Err(err).Str("subject", m.Subject()).Msg("dead-letter publish failed; message kept in the stream")
		c.nakDelay(m, 5*time.Second)
		return
	}
	c.m.deadLetters.Inc()
	if err := m.Ack(); err != nil {
		c.log.Warn().Err(err).Msg("ack after dead-lettering failed; the message may be dead-lettered twice")
	}
}

// errPermanent marks a message that can never be decoded.
var errPermanent = errors.New("undecodable message")

// decode reads a message into rows.
func (c *Consumer) decode(ctx context.Context, m jetstream.Msg) (*delivery, error) {
	d := &delivery{msg: m, tries: 1}
	md, err := m.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", errPermanent, err)
	}
	d.tries = md.NumDelivered
	env, err := events.ParseEnvelope(m.Subject(), originalHeader(m.Headers()), m.Data())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPermanent, err)
	}
	if env.ReceivedAt.IsZero() {
		env.ReceivedAt = md.Timestamp
	}
	d.env = env
	body, err := stream.Body(ctx, c.js, c.cfg.StreamConfig, env)
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
		d.failures = append(d.failures, alert.Failure{
			CrawlID: ev.ID, WebhookID: ev.WebhookID, URL: f.URL, Error: f.Error, At: env.ReceivedAt,
		})
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
					_ = m.InProgress()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
