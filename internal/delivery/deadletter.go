package delivery

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DeadLetterConfig names what dead letters move between. The stores
// themselves, and their settings, are internal/stream's
// (stream.DeadLetterConfig.Route fills this in).
type DeadLetterConfig struct {
	// Stream is the dead-letter stream (SINK_DLQ_STREAM); a dead letter's
	// subject is "<Stream>.<original subject>".
	Stream string
	// Bodies is the dead letters' body store: dead-lettering copies a body
	// stored aside into it (creating it if missing), a redrive copies it
	// back out.
	Bodies jetstream.ObjectStoreConfig
	// EventsStream is the events stream a redrive publishes to.
	EventsStream string
	// EventsBodies is the events stream's body store: dead-lettering copies
	// bodies out of it, a redrive copies them back (creating it if missing).
	EventsBodies jetstream.ObjectStoreConfig
}

// DeadLetters publishes dead letters and redrives them.
type DeadLetters struct {
	js  jetstream.JetStream
	cfg DeadLetterConfig
}

// NewDeadLetters returns the dead letters of cfg on js.
func NewDeadLetters(js jetstream.JetStream, cfg DeadLetterConfig) (*DeadLetters, error) {
	if js == nil {
		return nil, fmt.Errorf("dead letters: no JetStream")
	}
	if cfg.Stream == "" || cfg.Bodies.Bucket == "" || cfg.EventsStream == "" || cfg.EventsBodies.Bucket == "" {
		return nil, fmt.Errorf("dead letters: stream %q, its body bucket %q, events stream %q and its body bucket %q must all be named",
			cfg.Stream, cfg.Bodies.Bucket, cfg.EventsStream, cfg.EventsBodies.Bucket)
	}
	return &DeadLetters{js: js, cfg: cfg}, nil
}

// Stream is the dead-letter stream's name.
func (d *DeadLetters) Stream() string { return d.cfg.Stream }

// bodyTimeout bounds the copy of one body between object stores (up to
// WEBHOOK_MAX_BODY_BYTES).
const bodyTimeout = 2 * time.Minute

// Publish stores m in the dead-letter stream with the reason, and returns
// once JetStream confirmed it. The dead letter keeps m's headers, adds the
// HeaderDLQ* ones, and takes the Nats-Msg-Id "<stream>.<sequence>", so that
// a dead-lettering repeated after a crash is a duplicate. A body stored
// aside is first copied into the dead letters' object store (cfg.Bodies)
// under the dead letter's own id, and the dead letter points at the copy:
// the original object expires with the events stream, the dead letter does
// not.
func (d *DeadLetters) Publish(ctx context.Context, m jetstream.Msg, reason error) error {
	out := nats.NewMsg(d.cfg.Stream + "." + m.Subject())
	for k, v := range m.Headers() {
		out.Header[k] = append([]string(nil), v...)
	}
	out.Header.Set(HeaderDLQMsgID, m.Headers().Get(HeaderMsgID))
	out.Header.Set(HeaderDLQReason, reason.Error())
	out.Header.Set(HeaderDLQSubject, m.Subject())
	out.Header.Set(HeaderDLQAt, time.Now().UTC().Format(time.RFC3339Nano))
	msgID := m.Subject()
	if md, err := m.Metadata(); err == nil {
		out.Header.Set(HeaderDLQSequence, strconv.FormatUint(md.Sequence.Stream, 10))
		out.Header.Set(HeaderDLQDeliveries, strconv.FormatUint(md.NumDelivered, 10))
		msgID = md.Stream + "." + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	out.Header.Set(HeaderMsgID, msgID)
	out.Data = m.Data()

	copied := ""
	if ref := m.Headers().Get(HeaderBodyRef); ref != "" {
		// Named by the dead letter's id: a dead-lettering repeated after a
		// crash rewrites the same object.
		from := d.cfg.EventsBodies.Bucket
		found, err := copyObject(ctx, d.js, from, ref, d.cfg.Bodies, msgID)
		if err != nil {
			return fmt.Errorf("keep the body of the dead letter: %w", err)
		}
		if found {
			copied = msgID
			out.Header.Set(HeaderBodyRef, msgID)
		} else {
			out.Header.Set(HeaderDLQBodyMissing, "object "+ref+" not in "+from)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := d.js.PublishMsg(pctx, out, jetstream.WithExpectStream(d.cfg.Stream)); err != nil {
		if copied != "" {
			// Best effort: the message stays in the events stream, with its
			// own body, and is dead-lettered again later.
			if obs, oerr := d.js.ObjectStore(ctx, d.cfg.Bodies.Bucket); oerr == nil {
				_ = obs.Delete(ctx, copied)
			}
		}
		return fmt.Errorf("publish to %s: %w", d.cfg.Stream, err)
	}
	return nil
}
