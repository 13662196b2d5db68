package sink

import (
	"context"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// retry handles a message that failed alone: refused by ClickHouse, or
// (suspect) failing while ClickHouse answers. Its tries are its deliveries
// (JetStream's NumDelivered, kept by the server across sink restarts): it
// is nak'ed with backoff, and dead-lettered with the reason once it has
// been delivered SINK_MAX_DELIVER times. A suspect is remembered, so that
// when it comes back it is inserted alone and holds nothing else.
func (c *Consumer) retry(ctx context.Context, d *decoded, err error, suspect bool) {
	if d.tries >= uint64(c.cfg.MaxDeliver) {
		c.unsuspect(d.seq)
		c.deadLetter(ctx, d.msg, err)
		return
	}
	if suspect {
		c.suspect(d.seq)
	}
	delay := nakDelay(d.tries)
	c.log.Warn().Err(err).Str("webhook_id", d.env.WebhookID).Str("crawl_id", d.env.CrawlID).
		Uint64("tries", d.tries).Dur("retry_in", delay).Msg("ClickHouse did not take the message; retrying it later")
	c.nakDelay(d.msg, delay)
}

// suspect remembers the message of stream sequence seq as one that fails
// alone; the set is bounded (maxSuspects) by forgetting them all.
func (c *Consumer) suspect(seq uint64) {
	c.suspectsMu.Lock()
	defer c.suspectsMu.Unlock()
	if len(c.suspects) >= maxSuspects {
		clear(c.suspects)
	}
	c.suspects[seq] = true
}

func (c *Consumer) unsuspect(seq uint64) {
	c.suspectsMu.Lock()
	defer c.suspectsMu.Unlock()
	delete(c.suspects, seq)
}

func (c *Consumer) isSuspect(seq uint64) bool {
	c.suspectsMu.Lock()
	defer c.suspectsMu.Unlock()
	return c.suspects[seq]
}

// nakDelay is the backoff of a message tried n times: 1 s, 2 s, 4 s … 1 min.
func nakDelay(n uint64) time.Duration {
	return nakBackoff.Delay(int(min(n, 64)))
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
	c.settle(m)
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

// deadLetter publishes m to the dead-letter stream with the reason (and
// its body, see delivery.DeadLetters.Publish), logs it, and acks it; if the publish
// fails, m is nak'ed so that it is tried again: it is never dropped.
func (c *Consumer) deadLetter(ctx context.Context, m jetstream.Msg, reason error) {
	log := messageLog(c.log, m)
	if err := c.dlq.Publish(ctx, m, reason); err != nil {
		log.Error().Err(err).AnErr("reason", reason).Msg("dead-letter publish failed; message kept in the stream")
		c.nakDelay(m, 5*time.Second)
		return
	}
	log.Error().AnErr("reason", reason).Str("dlq_stream", c.dlq.Stream()).Msg("message dead-lettered")
	c.m.deadLetters.Inc()
	c.settle(m)
	if err := m.Ack(); err != nil {
		log.Warn().Err(err).Msg("ack after dead-lettering failed; the message may be dead-lettered twice")
	}
}

// messageLog is log with the fields that identify m: webhook id, crawl id,
// subject, deliveries. It reads the headers only, so that it works for a
// message that could not be decoded.
func messageLog(log zerolog.Logger, m jetstream.Msg) zerolog.Logger {
	h := m.Headers()
	l := log.With().Str("webhook_id", clampField(delivery.WebhookID(h))).Str("crawl_id", clampField(delivery.CrawlID(h))).
		Str("subject", clampField(m.Subject()))
	if md, err := m.Metadata(); err == nil {
		l = l.Uint64("tries", md.NumDelivered).Uint64("stream_seq", md.Sequence.Stream)
	}
	return l.Logger()
}

// settle marks m as answered (acked or nak'ed), so that the keep-alive no
// longer reports progress on it: an InProgress after a delayed nak would
// stretch the delay to the ack wait.
func (c *Consumer) settle(m jetstream.Msg) { c.settled.Store(m, struct{}{}) }

// clampField cuts a header value for a log line: a message that could not
// be decoded may carry anything.
func clampField(s string) string {
	const limit = 200
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
