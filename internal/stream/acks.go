package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// acks routes each PubAck straight to the delivery waiting for it.
//
// jetstream.PublishMsgAsync hands every PubAck from the connection's read
// loop to a goroutine of the shared reply subscription, which decodes it
// with encoding/json and passes it on through a channel, and arms a timer
// per message: two goroutine wake-ups and a timer for each delivery. Here a
// publish borrows a reply subject of its own from a pool, each subscribed
// once (ChanSubscribe) on the publisher's connection, so the read loop puts
// the PubAck directly on the channel its publisher waits on: one wake-up,
// no timer, and the usual PubAck decoded without reflection: less of the
// receiver's CPU per delivery (docs/benchmarks.md).
//
// A slot is reused only after its PubAck came: a publish that gave up
// (deadline, connection lost) unsubscribes its slot, so a late PubAck can
// never be taken for another delivery's.
type acks struct {
	nc     *nats.Conn
	prefix string      // "_INBOX.<nuid>.": the slots' reply subjects follow it
	writes *WriteGroup // nil: nats.go writes each publish itself

	mu   sync.Mutex
	free []*ackSlot
	next uint64
}

type ackSlot struct {
	sub   *nats.Subscription
	ch    chan *nats.Msg
	reply string
}

// noAckDeadline bounds the wait for a PubAck when the caller's context has
// no deadline of its own (the receiver's always has one).
const noAckDeadline = 30 * time.Second

func newAcks(nc *nats.Conn, writes *WriteGroup) *acks {
	// NewInbox follows the connection's inbox prefix, which accounts with
	// subscribe permissions set one.
	return &acks{nc: nc, prefix: nc.NewInbox() + ".", writes: writes}
}

// get takes a free slot or subscribes a new one.
func (a *acks) get() (*ackSlot, error) {
	a.mu.Lock()
	if n := len(a.free); n > 0 {
		s := a.free[n-1]
		a.free = a.free[:n-1]
		a.mu.Unlock()
		return s, nil
	}
	a.next++
	id := a.next
	a.mu.Unlock()
	s := &ackSlot{ch: make(chan *nats.Msg, 1), reply: a.prefix + strconv.FormatUint(id, 36)}
	sub, err := a.nc.ChanSubscribe(s.reply, s.ch)
	if err != nil {
		return nil, err
	}
	s.sub = sub
	return s, nil
}

func (a *acks) put(s *ackSlot) {
	a.mu.Lock()
	a.free = append(a.free, s)
	a.mu.Unlock()
}

// publish sends msg with a reply subject of its own and waits for the
// PubAck, at most until ctx is done.
func (a *acks) publish(ctx context.Context, msg *nats.Msg) (Ack, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, noAckDeadline)
		defer cancel()
	}
	s, err := a.get()
	if err != nil {
		return Ack{}, fmt.Errorf("%w: publish %s: reply subscription: %w", ErrUnavailable, msg.Subject, err)
	}
	// msg is this publish's own (delivery.Encode made it): it takes the
	// slot's reply subject rather than being copied.
	msg.Reply = s.reply
	if handed, err := a.send(msg); err != nil {
		if handed {
			// The connection took the message and then failed to write
			// (it may be on the server): its PubAck may still come, so
			// this slot is not reused.
			_ = s.sub.Unsubscribe()
		} else {
			// Nothing was sent: the slot is clean.
			a.put(s)
		}
		return Ack{}, fmt.Errorf("%w: publish %s: %w", ErrUnavailable, msg.Subject, err)
	}
	select {
	case m := <-s.ch:
		a.put(s)
		ack, err := parsePubAck(m)
		if err != nil {
			return Ack{}, fmt.Errorf("%w: publish %s: %w", ErrUnavailable, msg.Subject, err)
		}
		return ack, nil
	case <-ctx.Done():
		// The PubAck may still come: this slot is not reused.
		_ = s.sub.Unsubscribe()
		return Ack{}, fmt.Errorf("%w: publish %s: no PubAck: %w", ErrUnavailable, msg.Subject, ctx.Err())
	}
}

// send hands msg to the connection; with a write group, the write is made
// once nats.go's lock is released, together with the other publishes
// waiting (writegroup.go). handed says nats.go took the message: an error
// then is the socket's, and the message may have reached the server.
func (a *acks) send(msg *nats.Msg) (handed bool, _ error) {
	var c *groupConn
	if a.writes != nil {
		c = a.writes.promise(a.nc)
	}
	err := a.nc.PublishMsg(msg)
	if c != nil {
		if werr := c.settle(); err == nil && werr != nil {
			return true, werr
		}
	}
	return false, err
}

// parsePubAck reads JetStream's answer to a publish: a PubAck, an API
// error, or a status message (503: no stream listens on the subject).
func parsePubAck(m *nats.Msg) (Ack, error) {
	if len(m.Data) == 0 && m.Header != nil {
		if status := m.Header.Get("Status"); status != "" {
			if status == "503" {
				return Ack{}, nats.ErrNoResponders
			}
			return Ack{}, fmt.Errorf("status %s %s", status, m.Header.Get("Description"))
		}
	}
	if ack, ok := fastPubAck(m.Data); ok {
		return ack, nil
	}
	var pa struct {
		Stream    string `json:"stream"`
		Sequence  uint64 `json:"seq"`
		Duplicate bool   `json:"duplicate"`
		Error     *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &pa); err != nil {
		return Ack{}, fmt.Errorf("PubAck: %w", err)
	}
	if pa.Error != nil {
		return Ack{}, fmt.Errorf("JetStream error %d (%d): %s", pa.Error.Code, pa.Error.ErrCode, pa.Error.Description)
	}
	if pa.Stream == "" || pa.Sequence == 0 {
		return Ack{}, errors.New("PubAck without stream or sequence")
	}
	return Ack{Sequence: pa.Sequence, Duplicate: pa.Duplicate}, nil
}

// fastPubAck decodes the PubAck the server writes for a newly stored
// message, {"stream":"NAME","seq":N} (maybe with "domain"), in one pass;
// anything else (a duplicate, an error) is left to encoding/json. A JSON
// string holds '"' only escaped, so the keys looked for are never found
// inside the stream's name.
func fastPubAck(b []byte) (Ack, bool) {
	if !bytes.HasPrefix(b, []byte(`{"stream":"`)) || b[len(b)-1] != '}' ||
		bytes.Contains(b, []byte(`"error"`)) || bytes.Contains(b, []byte(`"duplicate"`)) {
		return Ack{}, false
	}
	i := bytes.Index(b, []byte(`"seq":`))
	if i < 0 {
		return Ack{}, false
	}
	rest := b[i+len(`"seq":`):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n > 20 || n == len(rest) || (rest[n] != ',' && rest[n] != '}') {
		return Ack{}, false
	}
	seq, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	if err != nil || seq == 0 {
		return Ack{}, false
	}
	return Ack{Sequence: seq}, true
}
