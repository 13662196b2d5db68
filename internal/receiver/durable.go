package receiver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/wal"
)

// errNotDurable: the write-ahead log could not take the delivery (full,
// closed, or a disk error). The sender gets 503 and retries.
var errNotDurable = errors.New("the delivery could not be written to stable storage")

// durablePublisher is the publisher with the write-ahead log on
// (RECEIVER_WAL_DIR): a delivery is written to the log and published to the
// stream at the same time, and acknowledged only when both are done, the
// log's write synced and the PubAck in. The stream may then sync lazily: a
// crash that takes its unsynced writes leaves the log's copy, replayed at
// the next start. The PubAck is still awaited, so that "duplicate" stays
// JetStream's exact answer.
type durablePublisher struct {
	pub Publisher
	wal *wal.WAL
}

// Durable is pub with the write-ahead log w on (see durablePublisher).
func Durable(pub Publisher, w *wal.WAL) Publisher { return &durablePublisher{pub: pub, wal: w} }

func (d *durablePublisher) Publish(ctx context.Context, env *delivery.Envelope) (stream.Ack, error) {
	// The log takes the delivery as received, before the publisher may
	// replace the envelope's body (compressed, or stored aside); its sync
	// runs while the delivery is published.
	pending, werr := d.wal.Begin(env)
	ack, err := d.pub.Publish(ctx, env)
	if werr == nil {
		werr = pending.Wait()
		// Answered, whichever way: the entry is trimmed a retention from
		// now, once the server has synced what it acknowledged.
		pending.Done()
	}
	if err != nil {
		return ack, err
	}
	if werr != nil {
		return stream.Ack{}, fmt.Errorf("%w: %w", errNotDurable, werr)
	}
	return ack, nil
}

// replayWAL publishes what an earlier process left in the log, retrying
// until it succeeds or ctx is done (JetStream may come up after the
// receiver). Each publish is idempotent inside the stream's duplicate
// window; a delivery replayed after it is stored once more, which the
// archive's table key removes.
func (s *Server) replayWAL(ctx context.Context, w *wal.WAL, pub Publisher) error {
	schedule := backoff.Exponential{First: 250 * time.Millisecond, Max: 5 * time.Second}
	return backoff.Retry(ctx, schedule, func() error {
		n, err := w.Replay(ctx, func(ctx context.Context, env *delivery.Envelope) error {
			// The subject as configured now: an entry written under another
			// NATS_SUBJECT_PREFIX would match no stream and be retried
			// forever, keeping the receiver from ever being ready.
			env.Subject = delivery.Subject(s.cfg.SubjectPrefix, env.Type)
			pctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
			defer cancel()
			_, err := pub.Publish(pctx, env)
			return err
		}, func(err error) {
			s.log.Error().Err(err).Msg("write-ahead log: an entry cannot be read; skipped")
		})
		if err == nil {
			s.log.Info().Int("deliveries", n).Msg("write-ahead log replayed into the stream")
		}
		return err
	}, func(_ int, err error, wait time.Duration) bool {
		s.log.Warn().Err(err).Dur("retry_in", wait).Msg("write-ahead log: replay failed")
		return true
	})
}
