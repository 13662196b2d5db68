package archive

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// Writer inserts rows: a batch of deliveries, what the backfill recovers,
// a crawl's backfill state. Lookups answer what the pipeline asks of the
// archive; Store is both on one connection. It is safe for concurrent use.
type Writer struct {
	conn    driver.Conn
	db      string
	cluster bool
	now     func() time.Time
	// read are the Lookups on conn, for the inserts that first ask what is
	// there (RecordBlockedURLs).
	read *Lookups
	// takedowns keeps what was taken down out of every insert.
	takedowns *takedownFilter
}

// NewWriter returns a Writer on conn for the tables of cfg.Database. On a
// cluster it writes through the Distributed tables, and an insert returns
// only once every shard holds its rows (see send).
func NewWriter(conn driver.Conn, cfg Config) (*Writer, error) {
	r, err := NewLookups(conn, cfg)
	if err != nil {
		return nil, err
	}
	return &Writer{conn: conn, db: cfg.Database, cluster: cfg.Cluster != "", now: time.Now, read: r,
		takedowns: &takedownFilter{conn: conn, db: cfg.Database}}, nil
}

// Store is the archive on one connection, for the callers that both read
// and write it: the sink asks which failures it already holds before it
// inserts a batch, the backfill which URLs it holds before it inserts the
// others.
type Store struct {
	*Writer
	*Lookups
}

// NewStore returns the Writer and the Lookups on conn for the tables of
// cfg.Database.
func NewStore(conn driver.Conn, cfg Config) (*Store, error) {
	w, err := NewWriter(conn, cfg)
	if err != nil {
		return nil, err
	}
	return &Store{Writer: w, Lookups: w.read}, nil
}

// Ping checks that ClickHouse answers.
func (w *Writer) Ping(ctx context.Context) error { return w.conn.Ping(ctx) }

const (
	pageColumns        = "crawl_id, job_kind, url, scrape_id, webhook_id, origin, success, status_code, title, content, markdown_bytes, error, document_cut, webhook_metadata, received_at, text_hash"
	failureColumns     = "crawl_id, job_kind, webhook_id, url, status_code, error, reason, webhook_metadata, received_at"
	crawlEventColumns  = "crawl_id, webhook_id, type, success, error, event, received_at"
	rawEventColumns    = "job_id, type, webhook_id, success, error, event, received_at"
	monitorPageColumns = "check_id, monitor_id, url, status, previous_scrape_id, current_scrape_id, is_meaningful, error, webhook_id, received_at"
)

// Insert writes rows with one batch insert per table that has rows: pages,
// then failures, crawl_events, events and monitor_pages. It returns when
// ClickHouse has committed them, or with the first error; tables already
// written stay written, which is harmless because every table's key makes a
// repeated insert collapse under FINAL. Rows a takedown in force covers are
// left out (takedownFilter).
func (w *Writer) Insert(ctx context.Context, rows Rows) error {
	rows, err := w.takedowns.filter(ctx, rows)
	if err != nil {
		return err
	}
	return w.insert(ctx, rows)
}

func (w *Writer) insert(ctx context.Context, rows Rows) error {
	if err := w.insertPages(ctx, rows.Pages); err != nil {
		return err
	}
	if err := w.insertFailures(ctx, rows.Failures); err != nil {
		return err
	}
	err := insertEach(ctx, w, "crawl_events", crawlEventColumns, rows.CrawlEvents, func(e *CrawlEvent) []any {
		return []any{e.CrawlID, e.WebhookID, e.Type, e.Success, e.Error, e.Event, e.ReceivedAt}
	})
	if err != nil {
		return err
	}
	err = insertEach(ctx, w, "events", rawEventColumns, rows.RawEvents, func(e *RawEvent) []any {
		return []any{e.JobID, e.Type, e.WebhookID, e.Success, e.Error, e.Event, e.ReceivedAt}
	})
	if err != nil {
		return err
	}
	return insertEach(ctx, w, "monitor_pages", monitorPageColumns, rows.MonitorPages, func(p *MonitorPage) []any {
		return []any{p.CheckID, p.MonitorID, p.URL, p.Status, p.PreviousScrapeID, p.CurrentScrapeID,
			p.IsMeaningful, p.Error, p.WebhookID, p.ReceivedAt}
	})
}

// insertEach is one batch insert of rows into table, each row's values
// given by values in the order of columns; nothing for no rows. It serves
// the tables of whole events, few rows per batch (pages and failures, the
// bulk, append without the slice).
func insertEach[T any](ctx context.Context, w *Writer, table, columns string, rows []T, values func(*T) []any) error {
	if len(rows) == 0 {
		return nil
	}
	return w.send(ctx, table, columns, len(rows), func(b driver.Batch, i int) error {
		return b.Append(values(&rows[i])...)
	})
}

func (w *Writer) insertPages(ctx context.Context, pages []Page) error {
	if len(pages) == 0 {
		return nil
	}
	// Every row of pages is written here, delivered or backfilled, so every
	// row gets its text hash here: the view page_versions_from_pages takes
	// it instead of hashing the markdown itself (migration 0020). It is
	// the hash of the markdown whatever the page's status; the view gives
	// a 404 or 410 page 0, as it always has.
	var texts TextHasher
	var both []byte // the row's content when it has html; reused row after row
	return w.sendBlocks(ctx, "pages", pageColumns, len(pages), func(b driver.Batch, i int) (int, error) {
		p := &pages[i]
		// content is the markdown then the html, compressed as one stream
		// (the html repeats the markdown's text); markdown and html are
		// ALIAS columns cutting it at markdown_bytes. The column copies
		// what it is given, so the two are joined in one buffer used for
		// every row rather than in a new string a row.
		var content any = p.Markdown
		if p.HTML != "" {
			both = append(append(both[:0], p.Markdown...), p.HTML...)
			content = both
		}
		doc := CutDocument(p.Document, p.Markdown, p.HTML)
		err := b.Append(p.CrawlID, jobKind(p.JobKind), p.URL, p.ScrapeID, p.WebhookID, p.Origin, p.Success, p.StatusCode,
			p.Title, content, uint32(len(p.Markdown)), p.Error, doc, p.WebhookMetadata, p.ReceivedAt,
			texts.Sum(p.Markdown))
		return len(p.Markdown) + len(p.HTML) + len(doc) + len(p.Title) + len(p.URL) + len(p.WebhookMetadata), err
	})
}

func (w *Writer) insertFailures(ctx context.Context, fs []Failure) error {
	if len(fs) == 0 {
		return nil
	}
	return w.send(ctx, "failures", failureColumns, len(fs), func(b driver.Batch, i int) error {
		f := &fs[i]
		reason := f.Reason
		if reason == "" {
			reason = events.ReasonFailed
		}
		return b.Append(f.CrawlID, jobKind(f.JobKind), f.WebhookID, f.URL, f.StatusCode, f.Error, reason, f.WebhookMetadata, f.ReceivedAt)
	})
}

// jobKind is the kind stored for a row: rows built before kinds existed, or
// by callers that do not know it, are crawls.
func jobKind(k string) string {
	if k == "" {
		return events.KindCrawl
	}
	return k
}

// foregroundInsert makes an insert into a Distributed table write to every
// shard before it returns. By default the node that takes the insert only
// queues the other shards' rows on its own disk and sends them later: the
// sink would ack deliveries whose rows sit unreplicated in one node's queue,
// and what it reads right after (the failure count of alerts, the URLs the
// backfill finds present) would miss them, so an alert was never raised and
// a delivered page could be backfilled over. In the foreground, a shard that
// is down fails the insert (ALL_CONNECTION_TRIES_FAILED, Unavailable): the
// sink holds the deliveries until the shard is back.
var foregroundInsert = clickhouse.Settings{"distributed_foreground_insert": 1}

// send is one batch insert into table.
func (w *Writer) send(ctx context.Context, table, columns string, n int, appendRow func(driver.Batch, int) error) error {
	return w.sendBlocks(ctx, table, columns, n, func(b driver.Batch, i int) (int, error) { return 0, appendRow(b, i) })
}

// insertBlockBytes is how many bytes of rows (as appendRow counts them) the
// client encodes into one block before sending it on: an insert of a large
// batch is sent as blocks of about this size, so the client's column
// buffers stay bounded whatever the batch, while ClickHouse squashes the
// blocks of one insert into one part (its min_insert_block_size_bytes,
// 256 MiB by default, and min_insert_block_size_rows, about a million):
// one part per insert, as a single block made. The client's columns are
// new for every insert and grow by doubling up to one block, copying what
// they hold at each step: 1 MiB rather than 4 cut that regrowth and the
// insert's share of the sink's CPU by about a quarter (docs/benchmarks.md,
// "The sink's cost per page").
const insertBlockBytes = 1 << 20

// sendBlocks is one batch insert into table, sent in blocks of about
// insertBlockBytes: appendRow appends row i and returns its size in bytes
// (0 for a table of small rows, sent as one block).
func (w *Writer) sendBlocks(ctx context.Context, table, columns string, n int, appendRow func(driver.Batch, int) (int, error)) error {
	if w.cluster {
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(foregroundInsert))
	}
	b, err := w.conn.PrepareBatch(ctx, "INSERT INTO "+w.db+"."+table+" ("+columns+")", driver.WithReleaseConnection())
	if err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	block := 0
	for i := range n {
		size, err := appendRow(b, i)
		if err != nil {
			_ = b.Abort()
			return fmt.Errorf("insert into %s: row %d: %w", table, i, err)
		}
		if block += size; block >= insertBlockBytes && i+1 < n {
			if err := b.Flush(); err != nil {
				_ = b.Abort()
				return fmt.Errorf("insert into %s: %w", table, err)
			}
			block = 0
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	return nil
}

// InsertBackfill archives Documents read from GET /v2/crawl/{id} for the
// backfill: origin "backfill", webhook_id the zero UUID, received_at now.
// Failed Documents (metadata.error, status >= 400: the API lists pages whose
// target answered 404 or 5xx) also get a failures row. Callers insert only
// the URLs ExistingURLs did not report, so a backfilled row never replaces
// or repeats what a webhook delivered. It returns the number of pages
// inserted.
func (w *Writer) InsertBackfill(ctx context.Context, crawlID, kind string, docs []events.Document) (int, error) {
	rows, err := w.backfillRows(crawlID, kind, docs, "backfill document", false)
	if err == nil {
		rows, err = w.takedowns.filter(ctx, rows)
	}
	if err != nil {
		return 0, err
	}
	if err := w.insert(ctx, rows); err != nil {
		return 0, err
	}
	return len(rows.Pages), nil
}

// backfillRows maps Documents read from the crawl API to rows of origin
// backfill: webhook_id the zero UUID, received_at now, a failures row for a
// failed Document. what names a Document in errors.
//
// Without mustFail the Documents are the status endpoint's, pages the API
// scraped: one fails as a delivered page with success true would
// (events.Failure: by its status code, never by a metadata.error the page
// may have set itself). With mustFail they are the errors endpoint's failed
// scrapes, the API's own list of failures: each is failed for its
// metadata.error (the endpoint's error text), cancelled when that is
// exactly the API's cancellation error, and one without an error is
// refused.
func (w *Writer) backfillRows(crawlID, kind string, docs []events.Document, what string, mustFail bool) (Rows, error) {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return Rows{}, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	now := w.now().UTC()
	var rows Rows
	for i := range docs {
		doc := &docs[i]
		p := page(id, doc, now)
		p.JobKind = kind
		if p.URL == "" {
			return Rows{}, fmt.Errorf("%s %d of crawl %s has neither metadata.url nor metadata.sourceURL", what, i, crawlID)
		}
		ev := &events.Event{Success: true}
		if mustFail {
			if doc.Metadata.Error == "" {
				return Rows{}, fmt.Errorf("%s %d of crawl %s (%s) carries no error", what, i, crawlID, p.URL)
			}
			ev = &events.Event{Success: false, Error: doc.Metadata.Error}
		}
		failed, reason := events.Failure(ev, doc)
		p.Origin, p.Success, p.Error = OriginBackfill, !failed, reason
		rows.Pages = append(rows.Pages, p)
		if failed {
			rows.Failures = append(rows.Failures, Failure{
				CrawlID: id, JobKind: kind, URL: p.URL, StatusCode: p.StatusCode,
				Error: reason, Reason: events.FailureReason(ev), ReceivedAt: now,
			})
		}
	}
	return rows, nil
}

// SetBackfillState records the backfill state of a crawl (one of
// internal/backfill's State*), with a free-form detail (counts, the error). The newest state is what `crawls` shows; the
// history stays in backfill_states.
func (w *Writer) SetBackfillState(ctx context.Context, crawlID, state, detail string) error {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	now := w.now().UTC()
	return w.send(ctx, "backfill_states", "crawl_id, state, detail, updated_at", 1, func(b driver.Batch, _ int) error {
		return b.Append(id, state, detail, now)
	})
}

// InsertBackfillFailures archives the failed scrapes the backfill read from
// the crawl API's errors endpoint (GET /v2/crawl/{id}/errors or its batch
// scrape twin) and the archive did not hold: scrapes that failed and whose
// webhook never arrived. Each is a failed Document, as a failed page
// delivery carries it, with metadata.sourceURL (or url) and metadata.error
// set; one that is not failed is refused. Each gets a failures row and a
// pages row (origin "backfill", success false, webhook id the zero UUID,
// received_at now).
//
// The failures rows are written first: the pages row is what ExistingURLs
// reports, so a crash between the two inserts leaves the URL absent and the
// next backfill records it again, and the failure row it repeats collapses
// under FINAL and counts once (failures count once per URL). Callers insert
// only the URLs ExistingURLs did not report: a failure never replaces a
// page the archive holds, successful or not. It returns the number of
// failures inserted.
func (w *Writer) InsertBackfillFailures(ctx context.Context, crawlID, kind string, failed []events.Document) (int, error) {
	rows, err := w.backfillRows(crawlID, kind, failed, "failed scrape", true)
	if err == nil {
		rows, err = w.takedowns.filter(ctx, rows)
	}
	if err != nil {
		return 0, err
	}
	if err := w.insertFailures(ctx, rows.Failures); err != nil {
		return 0, err
	}
	if err := w.insertPages(ctx, rows.Pages); err != nil {
		return 0, err
	}
	return len(rows.Pages), nil
}

// RecordBlockedURLs records URLs robots.txt kept a crawl from scraping (the
// errors endpoint's robotsBlocked) in blocked_urls, the ones not recorded
// yet and not taken down, and returns how many it inserted. They are neither pages nor
// failures: no alert counts them. Two backfills racing may both insert a
// URL; the table's key makes it one row under FINAL.
func (w *Writer) RecordBlockedURLs(ctx context.Context, crawlID string, urls []string) (int, error) {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return 0, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	have, err := w.read.BlockedURLs(ctx, crawlID)
	if err != nil {
		return 0, err
	}
	known := make(map[string]bool, len(have)+len(urls))
	for _, u := range have {
		known[u] = true
	}
	takenDown, err := w.takedowns.inForce(ctx)
	if err != nil {
		return 0, err
	}
	var add []string
	for _, u := range urls {
		if u != "" && !known[u] && !takenDown.Covers(id.String(), u) {
			known[u] = true
			add = append(add, u)
		}
	}
	if len(add) == 0 {
		return 0, nil
	}
	now := w.now().UTC()
	err = w.send(ctx, "blocked_urls", "crawl_id, url, recorded_at", len(add), func(b driver.Batch, i int) error {
		return b.Append(id, add[i], now)
	})
	if err != nil {
		return 0, err
	}
	return len(add), nil
}
