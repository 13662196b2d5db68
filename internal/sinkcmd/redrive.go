package sinkcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/rs/zerolog"
)

// runRedrive is `sink redrive`: every dead letter back to the events stream
// (delivery.DeadLetters.Redrive), then print how many.
func runRedrive(ctx context.Context, cfg Config, stdout io.Writer, log zerolog.Logger) error {
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-sink-redrive", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	dl, err := delivery.NewDeadLetters(js, cfg.deadLetters().Route())
	if err != nil {
		return err
	}
	n, err := dl.Redrive(ctx)
	fmt.Fprintf(stdout, "redriven %d dead letter(s) from %s to %s\n", n, cfg.DLQStream, cfg.StreamConfig.Stream)
	return err
}
