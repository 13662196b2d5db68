package sinkcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/backfill"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// runBackfill is `sink backfill [-kind crawl|batch_scrape] <crawl-id>`
// (args, checked by parseArgs): reconcile one job now and print what it
// found.
func runBackfill(ctx context.Context, cfg Config, args []string, stdout io.Writer, log zerolog.Logger, tracer trace.Tracer) error {
	crawlID, kind, err := backfillArgs(args)
	if err != nil {
		return err
	}
	if cfg.CrawlAPIURL == "" {
		return errors.New("sink backfill: CRAWL_API_URL is not set")
	}
	conn, err := archive.Open(cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := schema.Migrate(ctx, conn, cfg.ArchiveConfig, log); err != nil {
		return err
	}
	w, err := archive.NewStore(conn, cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	// A one-off run serves no /metrics: its counters go to a registry of
	// their own and are dropped.
	// A one-off run raises no alert: the running sinks' alerters count its
	// failures at their next check of the job.
	svc, nc, err := newBackfill(cfg, w, prometheus.NewRegistry(), log, nil, nil, tracer)
	if err != nil {
		return err
	}
	defer nc.Close()
	res, err := svc.Backfill(ctx, crawlID, kind)
	fmt.Fprintf(stdout, "crawl %s: pages fetched %d, inserted %d, already present %d; backfill %s\n",
		crawlID, res.Fetched, res.Inserted, res.Present, res.State)
	return err
}

// newBackfill is the sink's backfill: internal/backfill with its state and
// leases in the JetStream bucket CRAWL_BACKFILL, on a connection of its own
// (returned: the caller closes it once the service is done), and the
// archive as page store and state mirror. Its metrics are registered on
// reg; an error leaves reg as it was, so start-up may retry. failures, when
// set, is told of each job for which the backfill recorded failures whose
// webhooks were lost (the alerter's Failed). tracer (nil: off) traces its
// runs.
func newBackfill(cfg Config, w *archive.Store, reg prometheus.Registerer, log zerolog.Logger, failures, done func(crawlID string), tracer trace.Tracer) (*backfill.Service, *nats.Conn, error) {
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-sink-backfill", log)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := stream.EnsureBackfillState(ctx, js, cfg.StreamConfig.Replicas)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("backfill: %w", err)
	}
	svc, err := backfill.NewService(backfill.Config{
		APIURL: cfg.CrawlAPIURL, APIKey: cfg.CrawlAPIKey, Quiet: cfg.BackfillQuietPeriod,
		FailuresRecorded: failures,
		Done:             done,
		Tracer:           tracer,
	}, kv, &progressStore{Store: w, log: log, every: backfillProgressEvery}, w, reg, log)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("backfill: %w", err)
	}
	return svc, nc, nil
}

// backfillProgressEvery is how many chunks (next links) a backfill reads
// between two progress lines.
const backfillProgressEvery = 10

// progressStore is the archive as the backfill's page store, logging how
// far backfills are: the backfill asks which URLs of each chunk it read (a
// page of GET /v2/crawl/{id} or of its errors) are archived, so every call
// is one chunk read. A backfill of a large crawl runs for minutes; the
// line says it is moving. The counts are the process's (`sink backfill`
// runs one job; a sink may run several at once), so nothing is kept per
// job.
type progressStore struct {
	*archive.Store
	log   zerolog.Logger
	every int

	mu     sync.Mutex
	chunks int
	urls   int
}

// ExistingURLs counts the chunk and logs every p.every chunks.
func (p *progressStore) ExistingURLs(ctx context.Context, crawlID string, urls []string) (map[string]bool, error) {
	p.mu.Lock()
	p.chunks++
	p.urls += len(urls)
	chunks, read := p.chunks, p.urls
	p.mu.Unlock()
	if chunks%p.every == 0 {
		p.log.Info().Str("crawl_id", crawlID).Int("chunks_read", chunks).Int("urls_read", read).Msg("backfill progress")
	}
	return p.Store.ExistingURLs(ctx, crawlID, urls)
}
