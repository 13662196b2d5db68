package archive

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// Lookups are the questions the pipeline asks of the archive before or
// after it writes: the sink (which failures it already holds,
// PriorFailures), the backfill (which URLs, ExistingURLs, BlockedURLs),
// alerts (a crawl's recent failures), `sink delete` (the takedowns) and a
// job's status (its row of crawls, its top errors, its successful pages,
// which the read API's JobStatus also answers). They only read, and are
// safe for concurrent use. On a cluster they read through the Distributed
// tables.
type Lookups struct {
	conn driver.Conn
	db   string
}

// NewLookups returns the Lookups on conn for the tables of cfg.Database.
func NewLookups(conn driver.Conn, cfg Config) (*Lookups, error) {
	if conn == nil {
		return nil, errors.New("archive: nil ClickHouse connection")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Lookups{conn: conn, db: cfg.Database}, nil
}

// On returns the same Lookups asked through conn: the read API's
// connection, which bounds every query it sends.
func (l *Lookups) On(conn driver.Conn) *Lookups {
	return &Lookups{conn: conn, db: l.db}
}

// One query of URLs (ExistingURLs, PriorFailures) holds at most existingChunkURLs URLs and, past its
// first URL, existingChunkBytes of them. The URLs travel as a server-side
// query parameter, outside the query text and its max_query_size (a few
// hundred URLs of a few KB each exceeded it, and the same chunk then failed
// on every retry); the byte bound keeps each parameter and its answer
// modest whatever the URLs' length.
const (
	existingChunkURLs  = 500
	existingChunkBytes = 1 << 20
)

// urlChunks cuts urls into the chunks of one query (existingChunkURLs,
// existingChunkBytes).
func urlChunks(urls []string) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		for start := 0; start < len(urls); {
			end, size := start, 0
			for end < len(urls) && end-start < existingChunkURLs && (end == start || size+len(urls[end]) <= existingChunkBytes) {
				size += len(urls[end])
				end++
			}
			if !yield(urls[start:end]) {
				return
			}
			start = end
		}
	}
}

// ExistingURLs reports which of urls crawl crawlID already has in the
// archive, in any form: delivered or backfilled, successful or failed. The
// backfill inserts only the others, so running it again changes nothing: a
// failed page the API lists (its target answered 404 or 5xx) keeps its
// delivered row, origin and webhook id, and is not recorded as a failure a
// second time.
func (l *Lookups) ExistingURLs(ctx context.Context, crawlID string, urls []string) (map[string]bool, error) {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return nil, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	out := make(map[string]bool, len(urls))
	for chunk := range urlChunks(urls) {
		rows, err := l.conn.Query(ctx,
			"SELECT DISTINCT url FROM "+l.db+".pages WHERE crawl_id = {crawl:UUID} AND url IN {urls:Array(String)}",
			clickhouse.Named("crawl", id.String()), clickhouse.Named("urls", chunk))
		if err != nil {
			return nil, fmt.Errorf("existing urls of crawl %s: %w", crawlID, err)
		}
		for rows.Next() {
			var u string
			if err := rows.Scan(&u); err != nil {
				rows.Close()
				return nil, fmt.Errorf("existing urls of crawl %s: %w", crawlID, err)
			}
			out[u] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("existing urls of crawl %s: %w", crawlID, err)
		}
	}
	return out, nil
}

// Crawl is one row of the `crawls` view.
type Crawl struct {
	CrawlID uuid.UUID
	// Kind is events.KindCrawl or events.KindBatchScrape.
	Kind string
	// FirstDeliveryAt and LastDeliveryAt span the webhook deliveries (pages
	// and lifecycle events); nil when none arrived.
	FirstDeliveryAt *time.Time
	LastDeliveryAt  *time.Time
	// PagesReceived counts distinct URLs delivered by webhook,
	// PagesBackfilled distinct URLs recovered by backfill.
	PagesReceived   uint64
	PagesBackfilled uint64
	// Failures counts the distinct URLs that failed (delivered or
	// backfilled), CancelledPages those a cancellation left unscraped.
	Failures       uint64
	CancelledPages uint64
	// LastEvent is the type of the newest lifecycle event (crawl.completed…).
	LastEvent     string
	BackfillState string
}

// Crawl reads one crawl's row of `crawls`.
func (l *Lookups) Crawl(ctx context.Context, crawlID string) (Crawl, error) {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return Crawl{}, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	rows, err := l.conn.Query(ctx, "SELECT crawl_id, kind, first_delivery_at, last_delivery_at, pages_received, pages_backfilled, failures, cancelled_pages, last_event, backfill_state FROM "+l.db+".crawls WHERE crawl_id = ?", id)
	if err != nil {
		return Crawl{}, fmt.Errorf("crawl %s: %w", crawlID, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Crawl{}, fmt.Errorf("crawl %s: %w", crawlID, err)
		}
		return Crawl{}, ErrNoCrawl
	}
	var c Crawl
	if err := rows.Scan(&c.CrawlID, &c.Kind, &c.FirstDeliveryAt, &c.LastDeliveryAt, &c.PagesReceived, &c.PagesBackfilled, &c.Failures, &c.CancelledPages, &c.LastEvent, &c.BackfillState); err != nil {
		return Crawl{}, fmt.Errorf("crawl %s: %w", crawlID, err)
	}
	return c, nil
}

// SuccessfulPages counts the URLs of a job whose newest version is a
// successful page: what the crawl API calls completed.
func (l *Lookups) SuccessfulPages(ctx context.Context, crawlID string) (uint64, error) {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return 0, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	var n uint64
	if err := l.conn.QueryRow(ctx, "SELECT count() FROM "+l.db+".pages FINAL WHERE crawl_id = ? AND success", id).Scan(&n); err != nil {
		return 0, fmt.Errorf("pages of crawl %s: %w", crawlID, err)
	}
	return n, nil
}

// ErrorCount is one error text and how many failed pages gave it.
type ErrorCount struct {
	Error string
	Pages uint64
}

// TopErrors returns the n most frequent errors of a job's failed pages
// (once per URL; pages a cancellation left unscraped are not failures).
func (l *Lookups) TopErrors(ctx context.Context, crawlID string, n int) ([]ErrorCount, error) {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return nil, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	rows, err := l.conn.Query(ctx, "SELECT error, uniqExact(url) AS pages FROM "+l.db+".failures WHERE crawl_id = ? AND reason != ? GROUP BY error ORDER BY pages DESC, error LIMIT ?",
		id, events.ReasonCancelled, uint64(max(n, 0)))
	if err != nil {
		return nil, fmt.Errorf("errors of crawl %s: %w", crawlID, err)
	}
	defer rows.Close()
	var out []ErrorCount
	for rows.Next() {
		var e ErrorCount
		if err := rows.Scan(&e.Error, &e.Pages); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Recent is a crawl's failed pages received within a window: what alerts
// are raised on.
type Recent struct {
	// Failures counts distinct failed pages (a redelivered failure once).
	Failures int
	// LastURL and LastError describe the newest.
	LastURL, LastError string
	// Kind is the job's kind: "crawl" or "batch_scrape".
	Kind string
}

// RecentFailures counts the failed pages of a crawl first recorded since
// since, once per URL: a redelivered failure, a page that failed on
// delivery and is listed again by the API, or a captured delivery replayed
// later, is one failed page whatever the webhook ids and times of its rows
// (a backfilled row has the zero UUID), and it belongs to the window of its
// first record, so no repeat of it, however late, raises an alert again.
// Pages that a cancelled job never scraped (reason cancelled) are no outage
// and are not counted. It also returns the URL and error of the newest.
// It reads the failures table that every sink replica writes, so each
// replica's alerting sees the same count (internal/alert).
func (l *Lookups) RecentFailures(ctx context.Context, crawlID string, since time.Time) (Recent, error) {
	var rec Recent
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return rec, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	var n uint64
	err = l.conn.QueryRow(ctx,
		"SELECT count(), argMax(url, first), argMax(error, first), toString(max(kind)) FROM ("+
			"SELECT url, min(received_at) AS first, argMin(error, received_at) AS error, max(job_kind) AS kind FROM "+l.db+".failures "+
			"WHERE crawl_id = ? AND reason != ? GROUP BY url) WHERE first >= ?",
		id, events.ReasonCancelled, since).Scan(&n, &rec.LastURL, &rec.LastError, &rec.Kind)
	if err != nil {
		return rec, fmt.Errorf("recent failures of crawl %s: %w", crawlID, err)
	}
	rec.Failures = int(n)
	return rec, nil
}

// BlockedURLs returns the robots-blocked URLs recorded for a crawl, sorted.
func (l *Lookups) BlockedURLs(ctx context.Context, crawlID string) ([]string, error) {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return nil, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	rows, err := l.conn.Query(ctx, "SELECT DISTINCT url FROM "+l.db+".blocked_urls WHERE crawl_id = {crawl:UUID} ORDER BY url",
		clickhouse.Named("crawl", id.String()))
	if err != nil {
		return nil, fmt.Errorf("blocked urls of crawl %s: %w", crawlID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("blocked urls of crawl %s: %w", crawlID, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("blocked urls of crawl %s: %w", crawlID, err)
	}
	return out, nil
}
