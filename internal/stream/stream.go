package stream

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// EventsStreamConfig is the events stream as crawlhouse wants it. File storage:
// acknowledged deliveries must survive a restart. The duplicate window makes
// Nats-Msg-Id (the webhookId) drop the sender's retries. Limits retention
// keeps messages for MaxAge after the sink consumed them, so a replay or a
// redrive stays possible.
func EventsStreamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "crawlhouse: webhook deliveries of the crawl API",
		Subjects:    cfg.Subjects(),
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.MaxAge,
		Duplicates:  cfg.DedupWindow,
		Replicas:    cfg.Replicas,
		// Atomic batches let concurrent deliveries share one fsync: the
		// publisher's optional group commit (batch.go) uses them. Allowing
		// them costs nothing when they are not used.
		AllowAtomicPublish: true,
	}
}

// EnsureStream creates the events stream, or updates it to the configured
// settings, and the object store for oversized bodies; with
// cfg.Partitions > 1, every partition's (and returns the first's).
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Stream, error) {
	if cfg.Partitions > 1 {
		return ensureLanes(ctx, js, cfg)
	}
	s, err := js.CreateOrUpdateStream(ctx, EventsStreamConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("create or update stream %s: %w", cfg.Stream, err)
	}
	if _, err := js.CreateOrUpdateObjectStore(ctx, BodyStoreConfig(cfg)); err != nil {
		return nil, fmt.Errorf("create or update object store %s: %w", cfg.BodyBucket(), err)
	}
	return s, nil
}

// BodyStoreConfig is the object store of bodies too large for one message.
// Objects live as long as the messages that point at them.
func BodyStoreConfig(cfg Config) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      cfg.BodyBucket(),
		Description: "crawlhouse: delivery bodies larger than a NATS message",
		TTL:         cfg.MaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	}
}
