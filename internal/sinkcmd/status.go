package sinkcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/rs/zerolog"
)

// runStatus is `sink status <crawl-id>`: what the archive holds of one job
// and, when the crawl API is configured, whether it agrees, so that "did we
// get everything?" needs no SQL. It only reads. Every text that came from
// the crawl API or a crawled page goes through terminalText.
func runStatus(ctx context.Context, cfg Config, args []string, stdout io.Writer, log zerolog.Logger) error {
	crawlID, asJSON, err := statusArgs(args)
	if err != nil {
		return err
	}
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
	if asJSON {
		out := statusJSON{JobAnswer: reader.NewJobAnswer(st)}
		if cfg.CrawlAPIURL != "" {
			out.CrawlAPI = compareCrawlAPI(ctx, cfg, st, log)
		}
		return writeJSON(stdout, out)
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
	api := compareCrawlAPI(ctx, cfg, st, log)
	if api.Error != "" {
		fmt.Fprintf(stdout, "  crawl API:   no answer (%s)\n", terminalText(api.Error, 300))
		return nil
	}
	verdict := "agrees"
	if !api.Agrees {
		verdict = fmt.Sprintf("differs by %d", int64(api.Completed)-int64(st.SuccessfulPages))
	}
	fmt.Fprintf(stdout, "  crawl API:   %s, %d pages completed; archive holds %d successful: %s\n", terminalText(api.Status, 64), api.Completed, st.SuccessfulPages, verdict)
	return nil
}

// statusJSON is `sink status --json`: the read API's GET /v1/jobs/{id}
// body, with the crawl API's view when CRAWL_API_URL is set.
type statusJSON struct {
	reader.JobAnswer
	CrawlAPI *crawlAPIView `json:"crawl_api,omitempty"`
}

// crawlAPIView is what the crawl API says of a job beside the archive.
type crawlAPIView struct {
	Status    string `json:"status,omitempty"`
	Completed int    `json:"completed"`
	// Agrees: the API's completed count equals the archive's successful
	// pages. The API's completed counts successful scrapes; the archive's
	// pages counts every URL it holds, failed ones (a 404 page) included,
	// so the comparison is of successful pages.
	Agrees bool   `json:"agrees"`
	Error  string `json:"error,omitempty"`
}

// compareCrawlAPI asks the crawl API about st's job; a failure to ask is
// the view's Error.
func compareCrawlAPI(ctx context.Context, cfg Config, st query.JobStatus, log zerolog.Logger) *crawlAPIView {
	client, err := crawlapi.NewClient(crawlapi.ClientConfig{BaseURL: cfg.CrawlAPIURL, Key: cfg.CrawlAPIKey, Attempts: 3, NotFoundRetries: -1}, log)
	if err != nil {
		return &crawlAPIView{Error: err.Error()}
	}
	id := st.Crawl.CrawlID.String()
	page, err := client.Get(ctx, id, crawlapi.JobRef(st.Crawl.Kind, id))
	if err != nil {
		return &crawlAPIView{Error: err.Error()}
	}
	return &crawlAPIView{Status: page.Status, Completed: page.Completed, Agrees: uint64(page.Completed) == st.SuccessfulPages}
}

// writeJSON prints v as one line of JSON, as the read API's bodies.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// openReader opens the archive for a command that only reads it (status,
// diff); done closes its connection.
func openReader(cfg Config) (r *query.Reader, done func(), err error) {
	conn, err := archive.Open(cfg.ArchiveConfig)
	if err != nil {
		return nil, nil, err
	}
	if r, err = query.NewReader(conn, cfg.ArchiveConfig); err != nil {
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
