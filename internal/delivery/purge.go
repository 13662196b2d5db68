package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// DeleteMatching deletes from stream name every message for which match
// reports true, and returns their sequences. A stream that does not exist
// holds nothing to delete. It reads the messages one by one by sequence, as
// Redrive does: streams it serves (dead letters, quarantine) are bounded
// and rarely read, and a takedown is rare.
func DeleteMatching(ctx context.Context, js jetstream.JetStream, name string, match func(*jetstream.RawStreamMsg) bool) ([]uint64, error) {
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	var deleted []uint64
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return deleted, fmt.Errorf("read message %d of %s: %w", seq, name, err)
		}
		if !match(raw) {
			continue
		}
		if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return deleted, fmt.Errorf("delete message %d of %s: %w", seq, name, err)
		}
		deleted = append(deleted, seq)
	}
	return deleted, nil
}

// Delete removes every dead letter whose delivery covers reports true for
// (given the job id it was filed under and its body as received), with its
// body stored aside, and returns how many. A dead letter whose body is lost
// is judged by its job id alone. The body is deleted after its dead letter:
// an interrupted Delete leaves at worst a body no dead letter points at.
func (d *DeadLetters) Delete(ctx context.Context, covers func(jobID string, body []byte) bool) (int, error) {
	bodies := NewBodies(d.js, d.cfg.Bodies.Bucket)
	refs := map[uint64]string{}
	deleted, err := DeleteMatching(ctx, d.js, d.cfg.Stream, func(raw *jetstream.RawStreamMsg) bool {
		env, err := Decode(raw.Header.Get(HeaderDLQSubject), raw.Header, raw.Data)
		if err != nil {
			return false
		}
		body, err := bodies.Open(ctx, env)
		if err != nil {
			body = nil
		}
		if !covers(env.CrawlID, body) {
			return false
		}
		if env.BodyRef != "" {
			refs[raw.Sequence] = env.BodyRef
		}
		return true
	})
	var errs []error
	for _, seq := range deleted {
		if ref, ok := refs[seq]; ok {
			if err := deleteObject(ctx, d.js, d.cfg.Bodies.Bucket, ref); err != nil {
				errs = append(errs, fmt.Errorf("delete the body of dead letter %d: %w", seq, err))
			}
		}
	}
	return len(deleted), errors.Join(append([]error{err}, errs...)...)
}
