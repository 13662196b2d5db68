package stream

import (
	"context"
	"fmt"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/nats-io/nats.go/jetstream"
)

// Body returns the delivery bytes of an envelope exactly as the receiver got
// them: read from the object store when the body was stored aside, and
// decompressed when it was compressed.
func Body(ctx context.Context, js jetstream.JetStream, cfg Config, env *events.Envelope) ([]byte, error) {
	data := env.Body
	if env.BodyRef != "" {
		obs, err := js.ObjectStore(ctx, cfg.BodyBucket())
		if err != nil {
			return nil, fmt.Errorf("object store %s: %w", cfg.BodyBucket(), err)
		}
		data, err = obs.GetBytes(ctx, env.BodyRef)
		if err != nil {
			return nil, fmt.Errorf("body %s from object store: %w", env.BodyRef, err)
		}
	}
	return env.Decode(data)
}
