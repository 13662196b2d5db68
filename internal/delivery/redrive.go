package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Redrive moves every dead letter back to the events stream, to the subject
// it came from, for another try, and returns how many it moved. A dead
// letter is deleted only after the events stream confirmed the copy, so an
// interrupted redrive leaves at worst a message in both places (and the
// table key makes the second insert harmless).
//
// The redriven message loses the HeaderDLQ* headers, gets HeaderRedriveOf
// set to its webhookId and a Nats-Msg-Id of its own
// ("<webhookId>.redrive.<dlq stream>.<sequence>"), so that the events
// stream's duplicate window does not drop it; Decode reads it as the
// original delivery.
//
// A dead letter whose body is in the dead letters' object store has it
// copied back into the events stream's object store first, under the
// redriven message's id; the dead letter's copy is deleted after the
// dead letter itself. A dead letter whose body was already missing when it
// was dead-lettered cannot be archived: it is left in place and counted in
// the returned error.
func (d *DeadLetters) Redrive(ctx context.Context) (int, error) {
	js, cfg := d.js, d.cfg
	dlq, err := js.Stream(ctx, cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dead-letter stream %s: %w", cfg.Stream, err)
	}
	info, err := dlq.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("dead-letter stream %s: %w", cfg.Stream, err)
	}
	moved := 0
	var kept []string
	var errs []error
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := dlq.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return moved, fmt.Errorf("read dead letter %d: %w", seq, err)
		}
		subject := raw.Header.Get(HeaderDLQSubject)
		if subject == "" {
			return moved, fmt.Errorf("dead letter %d has no %s header", seq, HeaderDLQSubject)
		}
		if raw.Header.Get(HeaderDLQBodyMissing) != "" {
			kept = append(kept, strconv.FormatUint(seq, 10))
			continue
		}
		out := nats.NewMsg(subject)
		for k, v := range raw.Header {
			out.Header[k] = v
		}
		webhookID := raw.Header.Get(HeaderRedriveOf)
		if webhookID == "" {
			webhookID = raw.Header.Get(HeaderDLQMsgID)
		}
		for _, k := range []string{HeaderDLQReason, HeaderDLQSubject, HeaderDLQSequence, HeaderDLQDeliveries, HeaderDLQAt, HeaderDLQMsgID} {
			out.Header.Del(k)
		}
		msgID := webhookID + ".redrive." + cfg.Stream + "." + strconv.FormatUint(seq, 10)
		out.Header.Set(HeaderRedriveOf, webhookID)
		out.Header.Set(HeaderMsgID, msgID)
		out.Data = raw.Data
		ref := raw.Header.Get(HeaderBodyRef)
		if ref != "" {
			found, err := copyObject(ctx, js, cfg.Bodies.Bucket, ref, cfg.EventsBodies, msgID)
			if err != nil {
				return moved, fmt.Errorf("redrive the body of dead letter %d: %w", seq, err)
			}
			switch {
			case found:
				out.Header.Set(HeaderBodyRef, msgID)
			case objectExists(ctx, js, cfg.EventsBodies.Bucket, ref):
				// A dead letter from before dead letters kept their bodies:
				// its reference still points into the events stream's store.
				ref = ""
			default:
				kept = append(kept, strconv.FormatUint(seq, 10))
				continue
			}
		}
		if _, err := js.PublishMsg(ctx, out, jetstream.WithExpectStream(cfg.EventsStream)); err != nil {
			return moved, fmt.Errorf("redrive dead letter %d to %s: %w", seq, subject, err)
		}
		if err := dlq.DeleteMsg(ctx, seq); err != nil {
			return moved, fmt.Errorf("delete redriven dead letter %d: %w", seq, err)
		}
		moved++
		if ref != "" {
			// Only now: the redriven message is confirmed and owns its copy.
			if err := deleteObject(ctx, js, cfg.Bodies.Bucket, ref); err != nil {
				errs = append(errs, fmt.Errorf("delete the body of redriven dead letter %d: %w", seq, err))
			}
		}
	}
	if len(kept) > 0 {
		errs = append(errs, fmt.Errorf("%d dead letter(s) kept, their body was lost before they were dead-lettered (sequences %s of %s)",
			len(kept), strings.Join(kept, ", "), cfg.Stream))
	}
	return moved, errors.Join(errs...)
}
