package sink

import (
	"context"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// deadLetterConfig is where the sink's dead letters go and come from.
func deadLetterConfig(cfg Config) delivery.DeadLetterConfig {
	return delivery.DeadLetterConfig{
		Stream:       cfg.DLQStream,
		Replicas:     cfg.Replicas,
		EventsStream: cfg.StreamConfig.Stream,
		EventsBodies: stream.BodyStoreConfig(cfg.StreamConfig),
	}
}

// Redrive moves every dead letter back to the events stream (see
// delivery.DeadLetters.Redrive).
func Redrive(ctx context.Context, js jetstream.JetStream, cfg Config) (int, error) {
	dl, err := delivery.NewDeadLetters(js, deadLetterConfig(cfg))
	if err != nil {
		return 0, err
	}
	return dl.Redrive(ctx)
}
