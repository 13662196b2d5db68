package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/backfill"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Backfiller recovers pages the webhook path missed; the
// implementation lives in internal/backfill and is wired in through
// Options.NewBackfiller. The sink runs it beside the consumer, feeds it
// every committed delivery (Observer), and calls Backfill for
// `sink backfill <crawl-id>`. Its metrics (crawlhouse_backfill_*) are
// registered on the sink's registry by NewBackfiller.
type Backfiller interface {
	Observer
	// Run reconciles crawls (quiet ones, completed ones) until ctx is done.
	Run(ctx context.Context) error
	// Backfill reconciles one crawl now.
	Backfill(ctx context.Context, crawlID string) (BackfillResult, error)
}

// BackfillResult is what `sink backfill` prints.
type BackfillResult struct {
	// Fetched is the pages read from the crawl API, Inserted those archived
	// now, Present those the archive already had.
	Fetched, Inserted, Present int
	// State is the crawl's backfill state afterwards (archive.Backfill*).
	State string
}

// NewBackfiller builds the Backfiller from the sink's configuration and
// archive writer and registers its metrics on reg, the registry the sink
// serves on /metrics. It is called only when CRAWL_API_URL is set. The sink
// retries it during start-up, so an error must leave reg as it found it.
type NewBackfiller func(cfg Config, w *archive.Writer, reg prometheus.Registerer, log zerolog.Logger) (Backfiller, error)

// newBackfiller is the sink binary's Backfiller: internal/backfill with its
// state and leases in the JetStream bucket CRAWL_BACKFILL (on a connection
// of its own) and the archive as page store and state mirror.
func newBackfiller(cfg Config, w *archive.Writer, reg prometheus.Registerer, log zerolog.Logger) (Backfiller, error) {
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-sink-backfill", log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := backfill.NewService(ctx, backfill.Config{
		APIURL: cfg.CrawlAPIURL, APIKey: cfg.CrawlAPIKey, Quiet: cfg.BackfillQuietPeriod,
		// The state bucket is replicated like the stream: on a cluster it
		// must survive the loss of a node.
		KV: backfill.KVConfig{Replicas: cfg.StreamConfig.Replicas},
	}, js, w, w, reg, log)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("backfill: %w", err)
	}
	return &backfillService{Service: svc, nc: nc}, nil
}

// backfillService adapts backfill.Service to Backfiller.
type backfillService struct {
	*backfill.Service
	nc *nats.Conn
}

func (b *backfillService) Run(ctx context.Context) error {
	defer b.nc.Close()
	return b.Service.Run(ctx)
}

func (b *backfillService) Backfill(ctx context.Context, crawlID string) (BackfillResult, error) {
	r, err := b.Service.Backfill(ctx, crawlID)
	return BackfillResult{Fetched: r.Fetched, Inserted: r.Inserted, Present: r.Present, State: r.State}, err
}
