package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
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
)

// DLQConfig is the dead-letter stream: file storage, no age limit (a dead
// letter waits for an operator, SPEC §2: never dropped), subjects
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

// publish stores m in the dead-letter stream with the reason, and returns
// once JetStream confirmed it.
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
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := d.js.PublishMsg(ctx, out, jetstream.WithExpectStream(d.cfg.DLQStream)); err != nil {
		return fmt.Errorf("publish to %s: %w", d.cfg.DLQStream, err)
	}
	return nil
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
		out.Header.Set(HeaderRedriveOf, webhookID)
		out.Header.Set(events.HeaderMsgID, webhookID+".redrive."+cfg.DLQStream+"."+strconv.FormatUint(seq, 10))
		out.Data = raw.Data
		if _, err := js.PublishMsg(ctx, out, jetstream.WithExpectStream(cfg.StreamConfig.Stream)); err != nil {
			return moved, fmt.Errorf("redrive dead letter %d to %s: %w", seq, subject, err)
		}
		if err := dlq.DeleteMsg(ctx, seq); err != nil {
			return moved, fmt.Errorf("delete redriven dead letter %d: %w", seq, err)
		}
		moved++
	}
	return moved, nil
}
