package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/nats-io/nats.go/jetstream"
)

// DeadLetterConfig is the dead-letter stream beside the events stream: where
// the sink keeps the deliveries it could not archive until an operator
// redrives them. The message form of a dead letter, and the moves into and
// out of this stream, are internal/delivery's (delivery.DeadLetters).
type DeadLetterConfig struct {
	// Stream is the dead-letter stream's name (SINK_DLQ_STREAM).
	Stream string
	// Events is the events stream whose deliveries are dead-lettered: the
	// dead-letter stream and its body store take its replica count, and a
	// redrive returns to it.
	Events Config
}

// BodyBucket is the object store that keeps the bodies of dead letters
// whose delivery was too large for one message: "<Stream>_BODIES".
func (c DeadLetterConfig) BodyBucket() string { return c.Stream + "_BODIES" }

// DeadLetterStreamConfig is the dead-letter stream: file storage, no age
// limit (a dead letter waits for an operator: never dropped), subjects
// "<Stream>.<original subject>".
func DeadLetterStreamConfig(c DeadLetterConfig) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "crawlhouse: deliveries the sink could not archive (sink redrive moves them back)",
		Subjects:    []string{c.Stream + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		Duplicates:  2 * time.Minute,
		Replicas:    c.Events.Replicas,
	}
}

// DeadLetterBodyStoreConfig is the dead letters' object store. Like the
// dead-letter stream it has no age limit: the events stream's bodies expire
// with NATS_MAX_AGE, a dead letter waits for an operator, so it owns a copy
// of its body for as long as it exists.
func DeadLetterBodyStoreConfig(c DeadLetterConfig) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      c.BodyBucket(),
		Description: "crawlhouse: bodies of dead letters too large for one message",
		Storage:     jetstream.FileStorage,
		Replicas:    c.Events.Replicas,
	}
}

// EnsureDeadLetterStream creates the dead-letter stream and its body store,
// or updates them to the configured settings.
func EnsureDeadLetterStream(ctx context.Context, js jetstream.JetStream, c DeadLetterConfig) error {
	if _, err := js.CreateOrUpdateStream(ctx, DeadLetterStreamConfig(c)); err != nil {
		return fmt.Errorf("create or update dead-letter stream %s: %w", c.Stream, err)
	}
	if _, err := js.CreateOrUpdateObjectStore(ctx, DeadLetterBodyStoreConfig(c)); err != nil {
		return fmt.Errorf("create or update dead-letter body store %s: %w", c.BodyBucket(), err)
	}
	return nil
}

// Route is what delivery.DeadLetters moves dead letters between: this
// stream and its body store, and the events stream and its body store.
func (c DeadLetterConfig) Route() delivery.DeadLetterConfig {
	return delivery.DeadLetterConfig{
		Stream:       c.Stream,
		Bodies:       DeadLetterBodyStoreConfig(c),
		EventsStream: c.Events.Stream,
		EventsBodies: BodyStoreConfig(c.Events),
	}
}
