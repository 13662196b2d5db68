package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/google/uuid"
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
// back from its nak does not hold the batch it lands in. The batch's part
// of the stall, if any, ends with it.
func (c *Consumer) commit(ctx, work context.Context, b *batch) {
	var rest, suspects []*decoded
	for _, d := range b.deliveries {
		if c.isSuspect(d.seq) {
			suspects = append(suspects, d)
		} else {
			rest = append(rest, d)
		}
	}
	if len(rest) > 0 {
		c.insertOrIsolate(ctx, work, b, rest, false)
	}
	for _, d := range suspects {
		c.insertOrIsolate(ctx, work, b, []*decoded{d}, true)
	}
	c.endStall(b)
}

// insertOrIsolate inserts ds, part of batch b, holding them while ClickHouse is unavailable
// and bisecting them when ClickHouse refuses them, or keeps failing them
// while it answers. suspect means ds already failed as part of a larger
// batch (or alone, earlier): one more answered failure splits it at once.
func (c *Consumer) insertOrIsolate(ctx, work context.Context, b *batch, ds []*decoded, suspect bool) {
	// The pages, the bulk, are sized once: growing them by doubling
	// copied every page of a 16 MiB batch about twice.
	pages := 0
	for _, d := range ds {
		pages += len(d.rows.Pages)
	}
	rows := archive.Rows{Pages: make([]archive.Page, 0, pages)}
	for _, d := range ds {
		rows.Add(d.rows)
	}
	work, span := tracing.StartInsert(work, c.tracer, len(ds), traceParents(ds))
	outcome, held := "handed back", 1
	defer func() {
		tracing.EndInsert(span, outcome, len(rows.Pages)+len(rows.Failures)+len(rows.CrawlEvents), held)
	}()
	answered := 0
	for ; ; held++ {
		inserted, err := c.insert(work, ds, rows)
		if err == nil {
			c.committed(b, ds, inserted)
			outcome = "committed"
			return
		}
		class := archive.Classify(err)
		tracing.InsertFailed(work, class.String())
		outcome = "retried"
		if class == archive.Refused {
			if len(ds) == 1 {
				c.retry(work, ds[0], err, false)
				return
			}
			outcome = "bisected"
			c.log.Warn().Err(err).Int("messages", len(ds)).Msg("ClickHouse refused a batch; bisecting it to find the culprits")
			c.bisect(ctx, work, b, ds)
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
				outcome = "bisected"
				c.bisect(ctx, work, b, ds)
				return
			}
		}
		if ctx.Err() != nil {
			outcome = "handed back"
			c.log.Warn().Err(err).Int("messages", len(ds)).Msg("ClickHouse did not take the batch at shutdown; handing it back to JetStream")
			for _, d := range ds {
				c.nakDelay(d.msg, 0)
			}
			return
		}
		if c.stall.hold(b, err, len(ds)) {
			c.log.Error().Err(err).Int("messages", len(ds)).Str("class", class.String()).
				Msg("sink stalled: ClickHouse does not take the batch; holding it, nothing else is archived meanwhile")
		}
		delay := holdBackoff.Delay(held)
		c.log.Warn().Err(err).Int("messages", len(ds)).Str("class", class.String()).Dur("retry_in", delay).Msg("holding the batch")
		c.sleep(ctx, delay)
	}
}

// traceParents yields the trace context each message of ds carries, for
// the insert's span links.
func traceParents(ds []*decoded) func(yield func(string, string) bool) {
	return func(yield func(string, string) bool) {
		for _, d := range ds {
			if !yield(d.env.TraceParent, d.env.TraceState) {
				return
			}
		}
	}
}

// bisect inserts the two halves of ds on their own, each as a suspect.
func (c *Consumer) bisect(ctx, work context.Context, b *batch, ds []*decoded) {
	half := len(ds) / 2
	c.insertOrIsolate(ctx, work, b, ds[:half], true)
	c.insertOrIsolate(ctx, work, b, ds[half:], true)
}

// answers reports whether ClickHouse answers a ping now.
func (c *Consumer) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.w.Ping(ctx) == nil
}

// endStall releases b's part of the stall and says so once the stall is
// over.
func (c *Consumer) endStall(b *batch) {
	if held, was := c.stall.release(b); was {
		c.log.Warn().Dur("held", held).Msg("sink no longer stalled")
	}
}

// insert inserts the rows of ds (rows), but the failures the archive
// already holds from an earlier delivery (newFailures), and returns what it
// inserted.
func (c *Consumer) insert(ctx context.Context, ds []*decoded, rows archive.Rows) (archive.Rows, error) {
	ctx, cancel := context.WithTimeout(ctx, insertTimeout)
	defer cancel()
	start := time.Now()
	rows, err := c.newFailures(ctx, ds, rows)
	if err == nil {
		err = c.w.Insert(ctx, rows)
	}
	c.m.insert.Observe(time.Since(start).Seconds())
	return rows, err
}

// newFailures asks the archive what it holds of the failures of ds
// (archive.PriorFailures), sets each message's count of new failed pages,
// and returns rows without the failures that are replays of a recorded
// delivery. A failed page is new when no failure of its crawl and URL (no
// URL: of its delivery) was recorded before it was received, it is not
// one a cancellation left unscraped, and no earlier message of the batch
// has it: only new ones count in crawlhouse_page_failures_total and wake
// the alerter. Asking the archive, which every replica writes and which
// outlives them, rather than the stream's duplicate window (30 min) or a
// replica's memory, keeps a delivery replayed at any later time, to any
// replica, from counting twice. rows holds the failures of ds in order.
func (c *Consumer) newFailures(ctx context.Context, ds []*decoded, rows archive.Rows) (archive.Rows, error) {
	if len(rows.Failures) == 0 {
		return rows, nil
	}
	prior, err := c.w.PriorFailures(ctx, rows.Failures)
	if err != nil {
		return rows, err
	}
	type page struct {
		crawl uuid.UUID
		id    string // the URL, or the webhook id of a failure without one
	}
	counted := map[page]bool{}
	kept := make([]archive.Failure, 0, len(rows.Failures))
	i := 0
	for _, d := range ds {
		d.failed = 0
		for _, f := range d.rows.Failures {
			p := prior[i]
			i++
			if p != archive.PriorDelivery {
				kept = append(kept, f)
			}
			k := page{f.CrawlID, f.URL}
			if f.URL == "" {
				k.id = f.WebhookID.String()
			}
			if p != archive.PriorNone || f.Reason == events.ReasonCancelled || counted[k] {
				continue
			}
			counted[k] = true
			d.failed++
		}
	}
	rows.Failures = kept
	return rows, nil
}

// committed acks ds, of batch b, whose rows are in ClickHouse, counts
// them, and keeps what the observers are to be told (batch.tell).
func (c *Consumer) committed(b *batch, ds []*decoded, rows archive.Rows) {
	c.endStall(b)
	for _, d := range ds {
		c.unsuspect(d.seq)
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
	c.m.rows["events"].Add(float64(len(rows.RawEvents)))
	c.m.rows["monitor_pages"].Add(float64(len(rows.MonitorPages)))
	now := time.Now()
	for _, d := range ds {
		c.m.observeLatency(d, now)
		if d.failed > 0 {
			c.m.failures.Add(float64(d.failed))
		}
		if events.ClassOf(d.env.Type) == events.ClassRaw {
			// A monitor check or an extraction is no crawl: nothing to
			// back fill or alert on.
			continue
		}
		b.observed = append(b.observed, Committed{CrawlID: d.env.CrawlID, Type: d.env.Type, ReceivedAt: d.env.ReceivedAt, FailedPages: d.failed})
	}
	c.log.Debug().Int("messages", len(ds)).Int("pages", len(rows.Pages)).Msg("batch committed")
}
