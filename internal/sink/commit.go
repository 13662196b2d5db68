package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// isolateAfter is how many times in a row a batch may fail with a "try
// later" error while ClickHouse answers a ping before the sink stops
// waiting for the server and looks for a culprit in the batch. A few holds
// ride out a burst of pressure; a page too large for the server's memory
// limit fails every time, and holding it for ever would stop ingestion for
// everyone.
const isolateAfter = 3

// maxSuspects bounds the set of messages known to fail alone.
const maxSuspects = 10000

// commit inserts a batch. Messages that already failed alone ("suspects",
// see tryLater) are inserted each on its own after the others, so a culprit
// back from its nak does not hold the batch it lands in. The stall, if any,
// ends with the batch.
func (c *Consumer) commit(ctx, work context.Context, ds []*decoded) {
	var rest, suspects []*decoded
	for _, d := range ds {
		if c.suspects[d.seq] {
			suspects = append(suspects, d)
		} else {
			rest = append(rest, d)
		}
	}
	if len(rest) > 0 {
		c.insertOrIsolate(ctx, work, rest, false)
	}
	for _, d := range suspects {
		c.insertOrIsolate(ctx, work, []*decoded{d}, true)
	}
	c.endStall()
}

// insertOrIsolate inserts ds, holding them while ClickHouse is unavailable
// and bisecting them when ClickHouse refuses them, or keeps failing them
// while it answers. suspect means ds already failed as part of a larger
// batch (or alone, earlier): one more answered failure splits it at once.
func (c *Consumer) insertOrIsolate(ctx, work context.Context, ds []*decoded, suspect bool) {
	var rows archive.Rows
	for _, d := range ds {
		rows.Add(d.rows)
	}
	delay := time.Second
	answered := 0
	for {
		err := c.insert(work, rows)
		if err == nil {
			c.committed(work, ds, rows)
			return
		}
		class := archive.Classify(err)
		if class == archive.Refused {
			if len(ds) == 1 {
				c.retry(work, ds[0], err, false)
				return
			}
			c.log.Warn().Err(err).Int("messages", len(ds)).Msg("ClickHouse refused a batch; bisecting it to find the culprits")
			c.bisect(ctx, work, ds)
			return
		}
		// Only a failure while ClickHouse answers says something about the
		// data: during an outage nothing is isolated or charged a try.
		if class == archive.TryLater && c.answers(work) {
			answered++
			if suspect || answered >= isolateAfter {
				if len(ds) == 1 {
					c.retry(work, ds[0], fmt.Errorf("insert keeps failing while ClickHouse answers: %w", err), true)
					return
				}
				c.log.Warn().Err(err).Int("messages", len(ds)).Int("attempts", answered).
					Msg("batch keeps failing while ClickHouse answers; bisecting it to find the culprits")
				c.bisect(ctx, work, ds)
				return
			}
		}
		if ctx.Err() != nil {
			c.log.Warn().Err(err).Int("messages", len(ds)).Msg("ClickHouse did not take the batch at shutdown; handing it back to JetStream")
			for _, d := range ds {
				c.nakDelay(d.msg, 0)
			}
			return
		}
		if c.stall.hold(err, len(ds)) {
			c.log.Error().Err(err).Int("messages", len(ds)).Str("class", class.String()).
				Msg("sink stalled: ClickHouse does not take the batch; holding it, nothing else is archived meanwhile")
		}
		c.log.Warn().Err(err).Int("messages", len(ds)).Str("class", class.String()).Dur("retry_in", delay).Msg("holding the batch")
		c.sleep(ctx, delay)
		delay = min(delay*2, maxHoldDelay)
	}
}

// bisect inserts the two halves of ds on their own, each as a suspect.
func (c *Consumer) bisect(ctx, work context.Context, ds []*decoded) {
	half := len(ds) / 2
	c.insertOrIsolate(ctx, work, ds[:half], true)
	c.insertOrIsolate(ctx, work, ds[half:], true)
}

// answers reports whether ClickHouse answers a ping now.
func (c *Consumer) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.w.Ping(ctx) == nil
}

// endStall clears the stall and says so once.
func (c *Consumer) endStall() {
	if held, was := c.stall.clear(); was {
		c.log.Warn().Dur("held", held).Msg("sink no longer stalled")
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
func (c *Consumer) committed(ctx context.Context, ds []*decoded, rows archive.Rows) {
	c.endStall()
	if c.crashAfterInsert != nil && c.crashAfterInsert() {
		return
	}
	for _, d := range ds {
		delete(c.suspects, d.seq)
		c.settle(d.msg)
		if err := d.msg.Ack(); err != nil {
			// The rows are in; a redelivery inserts them again, harmlessly.
			c.log.Warn().Err(err).Str("webhook_id", d.env.WebhookID).Msg("ack failed; the message will be redelivered")
		}
	}
	c.m.batches.Inc()
	c.m.rows["pages"].Add(float64(len(rows.Pages)))
	c.m.rows["failures"].Add(float64(len(rows.Failures)))
	c.m.rows["crawl_events"].Add(float64(len(rows.CrawlEvents)))
	for _, d := range ds {
		if d.failed > 0 {
			c.m.failures.Add(float64(d.failed))
			c.alerts.Failed(d.env.CrawlID)
		}
		if c.observe != nil {
			c.observe.Observe(d.env.CrawlID, d.env.Type, d.env.ReceivedAt)
		}
	}
	c.log.Debug().Int("messages", len(ds)).Int("pages", len(rows.Pages)).Msg("batch committed")
}

// retry handles a message that failed alone: refused by ClickHouse, or
// (suspect) failing while ClickHouse answers. Its tries are its deliveries
// (JetStream's NumDelivered, kept by the server across sink restarts): it
// is nak'ed with backoff, and dead-lettered with the reason once it has
// been delivered SINK_MAX_DELIVER times. A suspect is remembered, so that
// when it comes back it is inserted alone and holds nothing else.
func (c *Consumer) retry(ctx context.Context, d *decoded, err error, suspect bool) {
	if d.tries >= uint64(c.cfg.MaxDeliver) {
		delete(c.suspects, d.seq)
		c.deadLetter(ctx, d.msg, err)
		return
	}
	if suspect {
		if len(c.suspects) >= maxSuspects {
			clear(c.suspects)
		}
		c.suspects[d.seq] = true
	}
	delay := nakDelay(d.tries)
	c.log.Warn().Err(err).Str("webhook_id", d.env.WebhookID).Str("crawl_id", d.env.CrawlID).
		Uint64("tries", d.tries).Dur("retry_in", delay).Msg("ClickHouse did not take the message; retrying it later")
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
	log.Error().AnErr("reason", reason).Str("dlq_stream", c.cfg.DLQStream).Msg("message dead-lettered")
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
