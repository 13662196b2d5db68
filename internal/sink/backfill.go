package sink

import (
	"context"
	"io"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/rs/zerolog"
)

// Backfiller recovers pages the webhook path missed (SPEC §5); the
// implementation lives in internal/backfill and is wired in through
// Options.NewBackfiller. The sink runs it beside the consumer, feeds it
// every committed delivery (Observer), and calls Backfill for
// `sink backfill <crawl-id>`.
type Backfiller interface {
	Observer
	// Run reconciles crawls (quiet ones, completed ones) until ctx is done.
	Run(ctx context.Context) error
	// Backfill reconciles one crawl now.
	Backfill(ctx context.Context, crawlID string) (BackfillResult, error)
	// WriteMetrics writes the backfill's metrics (crawlhouse_backfill_*)
	// in the Prometheus text format.
	WriteMetrics(w io.Writer)
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
// archive writer. It is called only when CRAWL_API_URL is set.
type NewBackfiller func(cfg Config, w *archive.Writer, log zerolog.Logger) (Backfiller, error)
