package query

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// JobsQuery lists jobs: rows of the `crawls` view, newest first (by first
// delivery; jobs only the backfill archived last), then by id.
type JobsQuery struct {
	// Kind is "crawl" or "batch_scrape"; empty: both.
	Kind string
	// Since and Until bound the first delivery (inclusive, exclusive);
	// zero: open. A job with no delivery passes only open bounds.
	Since, Until time.Time
	// Limit is the page's size: 1 to 500, 0 for 50.
	Limit int
	// Cursor continues from the Next of the previous page.
	Cursor string
}

// JobsPage is a page of jobs; Next continues it ("" at the end).
type JobsPage struct {
	Jobs []archive.Crawl
	Next string
}

const crawlColumns = "crawl_id, kind, first_delivery_at, last_delivery_at, pages_received, pages_backfilled, failures, cancelled_pages, last_event, backfill_state"

// Jobs lists the jobs of q.
func (r *Reader) Jobs(ctx context.Context, q JobsQuery) (JobsPage, error) {
	if q.Kind != "" && q.Kind != events.KindCrawl && q.Kind != events.KindBatchScrape {
		return JobsPage{}, invalid("kind", "must be crawl or batch_scrape")
	}
	limit, err := pageSize(q.Limit, 50, 500)
	if err != nil {
		return JobsPage{}, err
	}
	var w where
	if q.Kind != "" {
		w.add("kind = {kind:String}", clickhouse.Named("kind", q.Kind))
	}
	if !q.Since.IsZero() {
		w.add("first_delivery_at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')", clickhouse.Named("since", millis(q.Since)))
	}
	if !q.Until.IsZero() {
		w.add("first_delivery_at < fromUnixTimestamp64Milli({until:Int64}, 'UTC')", clickhouse.Named("until", millis(q.Until)))
	}
	k := keyset{query: fingerprint("jobs", q.Kind, q.Since, q.Until), cursor: q.Cursor, limit: limit, what: "jobs",
		key: "(toUnixTimestamp64Milli(ifNull(first_delivery_at, toDateTime64(0, 3, 'UTC'))), crawl_id)", after: "({t:Int64}, {c:UUID})"}
	jobs, next, err := readPage(ctx, r, k, w, func(where string) string {
		return "SELECT " + crawlColumns + " FROM " + r.db + ".crawls WHERE " + where +
			" ORDER BY ifNull(first_delivery_at, toDateTime64(0, 3, 'UTC')) DESC, crawl_id DESC"
	}, func(rows driver.Rows) (archive.Crawl, position, error) {
		var c archive.Crawl
		err := rows.Scan(&c.CrawlID, &c.Kind, &c.FirstDeliveryAt, &c.LastDeliveryAt, &c.PagesReceived, &c.PagesBackfilled, &c.Failures, &c.CancelledPages, &c.LastEvent, &c.BackfillState)
		var t int64
		if c.FirstDeliveryAt != nil {
			t = millis(*c.FirstDeliveryAt)
		}
		return c, position{Time: t, CrawlID: c.CrawlID.String()}, err
	})
	if err != nil {
		return JobsPage{}, err
	}
	return JobsPage{Jobs: jobs, Next: next}, nil
}

// JobStatus is what the archive knows of one job: its row of `crawls`,
// its most frequent errors and its successful pages (`sink status` prints
// it; the read API answers it).
type JobStatus struct {
	archive.Crawl
	// TopErrors are the most frequent errors of its failed pages.
	TopErrors []archive.ErrorCount
	// SuccessfulPages counts the URLs whose newest version succeeded.
	SuccessfulPages uint64
}

// JobStatus reads the status of job crawlID with its top errors. It fails
// with archive.ErrNoCrawl for a job the archive has never seen.
func (r *Reader) JobStatus(ctx context.Context, crawlID string, topErrors int) (JobStatus, error) {
	if _, err := uuid.Parse(crawlID); err != nil {
		return JobStatus{}, invalid("job", "not a job id (a UUID)")
	}
	c, err := r.lookups.Crawl(ctx, crawlID)
	if err != nil {
		return JobStatus{}, err
	}
	top, err := r.lookups.TopErrors(ctx, crawlID, topErrors)
	if err != nil {
		return JobStatus{}, err
	}
	ok, err := r.lookups.SuccessfulPages(ctx, crawlID)
	if err != nil {
		return JobStatus{}, err
	}
	return JobStatus{Crawl: c, TopErrors: top, SuccessfulPages: ok}, nil
}

// FailedPage is one failed page of a job (docs/search.md, "What counts as a
// failed page").
type FailedPage struct {
	URL        string
	StatusCode uint16
	Error      string
	// Reason is "failed", or "cancelled" for a page the job's cancellation
	// left unscraped.
	Reason     string
	ReceivedAt time.Time
}

// FailuresQuery lists the failed pages of a job, newest first.
type FailuresQuery struct {
	Job string
	// Reason is events.ReasonFailed, events.ReasonCancelled or "" (both).
	Reason string
	// Limit is the page's size: 1 to 1000, 0 for 100.
	Limit  int
	Cursor string
}

// FailuresPage is a page of failures; Next continues it.
type FailuresPage struct {
	Failures []FailedPage
	Next     string
}

// Failures lists the failures of q.Job (one row per URL and delivery, as
// `failures FINAL`), newest first.
func (r *Reader) Failures(ctx context.Context, q FailuresQuery) (FailuresPage, error) {
	id, err := uuid.Parse(q.Job)
	if err != nil {
		return FailuresPage{}, invalid("job", "not a job id (a UUID)")
	}
	if q.Reason != "" && q.Reason != events.ReasonFailed && q.Reason != events.ReasonCancelled {
		return FailuresPage{}, invalid("reason", "must be %s or %s", events.ReasonFailed, events.ReasonCancelled)
	}
	limit, err := pageSize(q.Limit, 100, 1000)
	if err != nil {
		return FailuresPage{}, err
	}
	var w where
	w.add("crawl_id = {job:UUID}", clickhouse.Named("job", id.String()))
	if q.Reason != "" {
		w.add("reason = {reason:String}", clickhouse.Named("reason", q.Reason))
	}
	// The key ends with the delivery (its webhook id), which a page does
	// not show: two failures of one URL at one millisecond stay two rows.
	k := keyset{query: fingerprint("failures", id, q.Reason), cursor: q.Cursor, limit: limit, what: "failures",
		key: "(received_at, url, webhook_id)", after: "(fromUnixTimestamp64Milli({t:Int64}, 'UTC'), {u:String}, {k:UUID})"}
	failures, next, err := readPage(ctx, r, k, w, func(where string) string {
		return "SELECT url, status_code, error, toString(reason), received_at, webhook_id FROM " + r.db + ".failures FINAL WHERE " +
			where + " ORDER BY received_at DESC, url DESC, webhook_id DESC"
	}, func(rows driver.Rows) (FailedPage, position, error) {
		var f FailedPage
		var hook uuid.UUID
		err := rows.Scan(&f.URL, &f.StatusCode, &f.Error, &f.Reason, &f.ReceivedAt, &hook)
		return f, position{Time: millis(f.ReceivedAt), URL: f.URL, Kind: hook.String()}, err
	})
	if err == nil && len(failures) == 0 && q.Cursor == "" {
		err = r.ensureJob(ctx, id)
	}
	if err != nil {
		return FailuresPage{}, err
	}
	return FailuresPage{Failures: failures, Next: next}, nil
}

// BlockedQuery lists the robots-blocked URLs of a job, by URL.
type BlockedQuery struct {
	Job string
	// Limit is the page's size: 1 to 1000, 0 for 100.
	Limit  int
	Cursor string
}

// BlockedPage is a page of blocked URLs; Next continues it.
type BlockedPage struct {
	URLs []string
	Next string
}

// Blocked lists the robots-blocked URLs of q.Job, sorted; a job the
// archive has never seen is archive.ErrNoCrawl, not an empty list.
func (r *Reader) Blocked(ctx context.Context, q BlockedQuery) (BlockedPage, error) {
	id, err := uuid.Parse(q.Job)
	if err != nil {
		return BlockedPage{}, invalid("job", "not a job id (a UUID)")
	}
	limit, err := pageSize(q.Limit, 100, 1000)
	if err != nil {
		return BlockedPage{}, err
	}
	var w where
	w.add("crawl_id = {job:UUID}", clickhouse.Named("job", id.String()))
	k := keyset{query: fingerprint("blocked", id), cursor: q.Cursor, limit: limit, what: "blocked urls",
		key: "url", after: "{u:String}", ascending: true}
	urls, next, err := readPage(ctx, r, k, w, func(where string) string {
		return "SELECT DISTINCT url FROM " + r.db + ".blocked_urls WHERE " + where + " ORDER BY url"
	}, func(rows driver.Rows) (string, position, error) {
		var u string
		err := rows.Scan(&u)
		return u, position{URL: u}, err
	})
	if err == nil && len(urls) == 0 && q.Cursor == "" {
		err = r.ensureJob(ctx, id)
	}
	if err != nil {
		return BlockedPage{}, err
	}
	return BlockedPage{URLs: urls, Next: next}, nil
}

// ensureJob fails with archive.ErrNoCrawl when the archive has never seen job.
func (r *Reader) ensureJob(ctx context.Context, job uuid.UUID) error {
	var n uint64
	if err := r.conn.QueryRow(ctx, "SELECT count() FROM "+r.db+".crawls WHERE crawl_id = {job:UUID}", clickhouse.Named("job", job.String())).Scan(&n); err != nil {
		return readErr("job", err)
	}
	if n == 0 {
		return fmt.Errorf("job %s: %w", job, archive.ErrNoCrawl)
	}
	return nil
}
