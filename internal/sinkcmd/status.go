package sinkcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/rs/zerolog"
)

// runStatus is `sink status <crawl-id>`: what the archive holds of one job
// and, when the crawl API is configured, whether it agrees, so that "did we
// get everything?" needs no SQL. It only reads. Every text that came from
// the crawl API or a crawled page goes through terminalText.
func runStatus(ctx context.Context, cfg Config, crawlID string, stdout io.Writer, log zerolog.Logger) error {
	r, done, err := openReader(cfg)
	if err != nil {
		return err
	}
	defer done()
	st, err := r.JobStatus(ctx, crawlID, 5)
	if errors.Is(err, archive.ErrNoCrawl) {
		return fmt.Errorf("sink status: the archive has nothing of job %s", crawlID)
	}
	if err != nil {
		return err
	}
	c, top := st.Crawl, st.TopErrors
	fmt.Fprintf(stdout, "%s %s\n", terminalText(c.Kind, 20), terminalText(crawlID, 64))
	fmt.Fprintf(stdout, "  pages:       %d received by webhook, %d backfilled\n", c.PagesReceived, c.PagesBackfilled)
	fmt.Fprintf(stdout, "  failures:    %d failed pages, %d cancelled\n", c.Failures, c.CancelledPages)
	for _, e := range top {
		fmt.Fprintf(stdout, "    %6d  %s\n", e.Pages, terminalText(e.Error, 120))
	}
	fmt.Fprintf(stdout, "  deliveries:  first %s, last %s\n", when(c.FirstDeliveryAt), when(c.LastDeliveryAt))
	fmt.Fprintf(stdout, "  last event:  %s\n", orNone(terminalText(c.LastEvent, 64)))
	fmt.Fprintf(stdout, "  backfill:    %s\n", orNone(terminalText(c.BackfillState, 64)))

	if cfg.CrawlAPIURL == "" {
		fmt.Fprintln(stdout, "  crawl API:   not configured (CRAWL_API_URL)")
		return nil
	}
	client, err := crawlapi.NewClient(crawlapi.ClientConfig{BaseURL: cfg.CrawlAPIURL, Key: cfg.CrawlAPIKey, Attempts: 3, NotFoundRetries: -1}, log)
	if err != nil {
		return err
	}
	page, err := client.Get(ctx, crawlID, crawlapi.JobRef(c.Kind, crawlID))
	if err != nil {
		fmt.Fprintf(stdout, "  crawl API:   no answer (%s)\n", terminalText(err.Error(), 300))
		return nil
	}
	// The API's completed counts successful scrapes; the archive's pages
	// counts every URL it holds, failed ones (a 404 page) included, so the
	// comparison is of successful pages.
	ok := st.SuccessfulPages
	verdict := "agrees"
	if uint64(page.Completed) != ok {
		verdict = fmt.Sprintf("differs by %d", int64(page.Completed)-int64(ok))
	}
	fmt.Fprintf(stdout, "  crawl API:   %s, %d pages completed; archive holds %d successful: %s\n", terminalText(page.Status, 64), page.Completed, ok, verdict)
	return nil
}

// openReader opens the archive for a command that only reads it (status,
// diff); done closes its connection.
func openReader(cfg Config) (r *archive.Reader, done func(), err error) {
	conn, err := archive.Open(cfg.ArchiveConfig)
	if err != nil {
		return nil, nil, err
	}
	if r, err = archive.NewReader(conn, cfg.ArchiveConfig); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return r, func() { conn.Close() }, nil
}

func when(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
