package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers the sink adds to a dead letter, besides the original message's.
const (
	// HeaderDLQReason is why the message was dead-lettered.
	HeaderDLQReason = "Crawlhouse-Dlq-Reason"
	// HeaderDLQSubject is the subject the message was published to.
	HeaderDLQSubject = "Crawlhouse-Dlq-Subject"
	// HeaderDLQSequence is its sequence in the events stream.
	HeaderDLQSequence = "Crawlhouse-Dlq-Stream-Sequence"
	// HeaderDLQDeliveries is how many times it was delivered.
	HeaderDLQDeliveries = "Crawlhouse-Dlq-Deliveries"
	// HeaderDLQAt is when it was dead-lettered.
	HeaderDLQAt = "Crawlhouse-Dlq-At"
	// HeaderDLQMsgID keeps the original Nats-Msg-Id (the webhookId): the
	// dead letter's own Nats-Msg-Id is "<stream>.<sequence>", which makes a
	// dead-lettering repeated after a crash a duplicate.
	HeaderDLQMsgID = "Crawlhouse-Dlq-Msg-Id"
	// HeaderRedriveOf is set on a redriven message to its webhookId. A
	// redriven message needs a Nats-Msg-Id of its own, or the events
	// stream's duplicate window would drop it as the original's duplicate.
	HeaderRedriveOf = "Crawlhouse-Redrive-Of"
	// HeaderDLQBodyMissing is set on a dead letter whose body was stored
	// aside and was already gone when it was dead-lettered (the reason it
	// could not be read, usually): there is nothing to redrive.
	HeaderDLQBodyMissing = "Crawlhouse-Dlq-Body-Missing"
)

// DLQBodyBucket is the object store that keeps the bodies of dead letters
// whose delivery was too large for one message: "<SINK_DLQ_STREAM>_BODIES".
func DLQBodyBucket(cfg Config) string { return cfg.DLQStream + "_BODIES" }

// DLQBodyStoreConfig is the dead letters' object store. Like the dead-letter
// stream it has no age limit: the events stream's bodies expire with
// NATS_MAX_AGE, a dead letter waits for an operator, so it owns a copy of
// its body for as long as it exists.
func DLQBodyStoreConfig(cfg Config) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      DLQBodyBucket(cfg),
		Description: "crawlhouse: bodies of dead letters too large for one message",
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	}
}

// DLQConfig is the dead-letter stream: file storage, no age limit (a dead
// letter waits for an operator: never dropped), subjects
// "<SINK_DLQ_STREAM>.<original subject>".
func DLQConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.DLQStream,
		Description: "crawlhouse: deliveries the sink could not archive (sink redrive moves them back)",
		Subjects:    []string{cfg.DLQStream + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		Duplicates:  2 * time.Minute,
		Replicas:    cfg.Replicas,
	}
}

type deadLetters struct {
	js  jetstream.JetStream
	cfg Config
}

// bodyTimeout bounds the copy of one body between object stores (up to
// WEBHOOK_MAX_BODY_BYTES).
const bodyTimeout = 2 * time.Minute

// publish stores m in the dead-letter stream with the reason, and returns
// once JetStream confirmed it. A body stored aside is first copied into the
// dead letters' object store (DLQBodyBucket) under the dead letter's own id,
// and the dead letter points at the copy: the original object expires with
// the events stream, the dead letter does not.
func (d *deadLetters) publish(ctx context.Context, m jetstream.Msg, reason error) error {
	out := nats.NewMsg(d.cfg.DLQStream + "." + m.Subject())
	for k, v := range m.Headers() {
		out.Header[k] = append([]string(nil), v...)
	}
	out.Header.Set(HeaderDLQMsgID, m.Headers().Get(events.HeaderMsgID))
	out.Header.Set(HeaderDLQReason, reason.Error())
	out.Header.Set(HeaderDLQSubject, m.Subject())
	out.Header.Set(HeaderDLQAt, time.Now().UTC().Format(time.RFC3339Nano))
	msgID := m.Subject()
	if md, err := m.Metadata(); err == nil {
		out.Header.Set(HeaderDLQSequence, strconv.FormatUint(md.Sequence.Stream, 10))
		out.Header.Set(HeaderDLQDeliveries, strconv.FormatUint(md.NumDelivered, 10))
		msgID = md.Stream + "." + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	out.Header.Set(events.HeaderMsgID, msgID)
	out.Data = m.Data()

	copied := ""
	if ref := m.Headers().Get(events.HeaderBodyRef); ref != "" {
		// Named by the dead letter's id: a dead-lettering repeated after a
		// crash rewrites the same object.
		found, err := copyObject(ctx, d.js, d.cfg.BodyBucket(), ref, DLQBodyStoreConfig(d.cfg), msgID)
		if err != nil {
			return fmt.Errorf("keep the body of the dead letter: %w", err)
		}
		if found {
			copied = msgID
			out.Header.Set(events.HeaderBodyRef, msgID)
		} else {
			out.Header.Set(HeaderDLQBodyMissing, "object "+ref+" not in "+d.cfg.BodyBucket())
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := d.js.PublishMsg(pctx, out, jetstream.WithExpectStream(d.cfg.DLQStream)); err != nil {
		if copied != "" {
			// Best effort: the message stays in the events stream, with its
			// own body, and is dead-lettered again later.
			if obs, oerr := d.js.ObjectStore(ctx, DLQBodyBucket(d.cfg)); oerr == nil {
				_ = obs.Delete(ctx, copied)
			}
		}
		return fmt.Errorf("publish to %s: %w", d.cfg.DLQStream, err)
	}
	return nil
}

// copyObject copies the object name of bucket from into the bucket of to
// (created when missing) as dst, streaming it. found is false, with no
// error, when the source object does not exist.
func copyObject(ctx context.Context, js jetstream.JetStream, from, name string, to jetstream.ObjectStoreConfig, dst string) (found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, bodyTimeout)
	defer cancel()
	src, err := js.ObjectStore(ctx, from)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("object store %s: %w", from, err)
	}
	r, err := src.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s from %s: %w", name, from, err)
	}
	defer r.Close()
	obs, err := js.ObjectStore(ctx, to.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateOrUpdateObjectStore(ctx, to)
	}
	if err != nil {
		return false, fmt.Errorf("object store %s: %w", to.Bucket, err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: dst}, r); err != nil {
		return false, fmt.Errorf("write %s to %s: %w", dst, to.Bucket, err)
	}
	return true, nil
}

// originalHeader is the header of a delivery as the receiver published it:
// for a redriven message, Nats-Msg-Id is the webhookId again.
func originalHeader(h nats.Header) map[string][]string {
	of := h.Get(HeaderRedriveOf)
	if of == "" {
		return h
	}
	c := make(map[string][]string, len(h))
	for k, v := range h {
		c[k] = v
	}
	c[events.HeaderMsgID] = []string{of}
	return c
}

// Redrive moves every dead letter back to the events stream, to the subject
// it came from, for another try, and returns how many it moved. A dead
// letter is deleted only after the events stream confirmed the copy, so an
// interrupted redrive leaves at worst a message in both places (and the
// table key makes the second insert harmless).
//
// A dead letter whose body is in the dead letters' object store has it
// copied back into the events stream's object store first, under the
// redriven message's id; the dead letter's copy is deleted after the
// dead letter itself. A dead letter whose body was already missing when it
// was dead-lettered cannot be archived: it is left in place and counted in
// the returned error.
func Redrive(ctx context.Context, js jetstream.JetStream, cfg Config) (int, error) {
	dlq, err := js.Stream(ctx, cfg.DLQStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dead-letter stream %s: %w", cfg.DLQStream, err)
	}
	info, err := dlq.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("dead-letter stream %s: %w", cfg.DLQStream, err)
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
		msgID := webhookID + ".redrive." + cfg.DLQStream + "." + strconv.FormatUint(seq, 10)
		out.Header.Set(HeaderRedriveOf, webhookID)
		out.Header.Set(events.HeaderMsgID, msgID)
		out.Data = raw.Data
		ref := raw.Header.Get(events.HeaderBodyRef)
		if ref != "" {
			found, err := copyObject(ctx, js, DLQBodyBucket(cfg), ref, stream.BodyStoreConfig(cfg.StreamConfig), msgID)
			if err != nil {
				return moved, fmt.Errorf("redrive the body of dead letter %d: %w", seq, err)
			}
			switch {
			case found:
				out.Header.Set(events.HeaderBodyRef, msgID)
			case objectExists(ctx, js, cfg.BodyBucket(), ref):
				// A dead letter from before dead letters kept their bodies:
				// its reference still points into the events stream's store.
				ref = ""
			default:
				kept = append(kept, strconv.FormatUint(seq, 10))
				continue
			}
		}
		if _, err := js.PublishMsg(ctx, out, jetstream.WithExpectStream(cfg.StreamConfig.Stream)); err != nil {
			return moved, fmt.Errorf("redrive dead letter %d to %s: %w", seq, subject, err)
		}
		if err := dlq.DeleteMsg(ctx, seq); err != nil {
			return moved, fmt.Errorf("delete redriven dead letter %d: %w", seq, err)
		}
		moved++
		if ref != "" {
			// Only now: the redriven message is confirmed and owns its copy.
			if err := deleteObject(ctx, js, DLQBodyBucket(cfg), ref); err != nil {
				errs = append(errs, fmt.Errorf("delete the body of redriven dead letter %d: %w", seq, err))
			}
		}
	}
	if len(kept) > 0 {
		errs = append(errs, fmt.Errorf("%d dead letter(s) kept, their body was lost before they were dead-lettered (sequences %s of %s)",
			len(kept), strings.Join(kept, ", "), cfg.DLQStream))
	}
	return moved, errors.Join(errs...)
}

func objectExists(ctx context.Context, js jetstream.JetStream, bucket, name string) bool {
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return false
	}
	_, err = obs.GetInfo(ctx, name)
	return err == nil
}

func deleteObject(ctx context.Context, js jetstream.JetStream, bucket, name string) error {
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return err
	}
	if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	return nil
}
