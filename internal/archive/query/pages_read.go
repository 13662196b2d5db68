package query

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
)

// PageParts says which bodies of a page to read: each reads the page's
// whole content (docs/search.md), so only those asked for are.
type PageParts struct {
	Markdown, HTML, Document bool
}

// ArchivedPage is one archived version of a page, as the read API shows it.
type ArchivedPage struct {
	CrawlID    uuid.UUID
	JobKind    string
	URL        string
	Title      string
	StatusCode uint16
	Success    bool
	// Origin is "webhook" or "backfill".
	Origin     string
	ReceivedAt time.Time
	// Error is the failure's text for a failed page.
	Error string
	// The bodies asked for (PageParts); crawled content, hostile.
	Markdown string
	HTML     string
	// Document is the Document as the crawl API sent it, byte for byte.
	Document json.RawMessage
}

// maxURL bounds a URL parameter: the crawl API's URLs are far shorter.
const maxURL = 8 << 10

// Page reads the newest version of url, or with job the version that job
// holds. It fails with ErrNoPage when no job holds url, and ErrNoVersion
// when job does not.
func (r *Reader) Page(ctx context.Context, url, job string, parts PageParts) (ArchivedPage, error) {
	if url == "" || len(url) > maxURL {
		return ArchivedPage{}, invalid("url", "must be given, at most %d bytes", maxURL)
	}
	w := where{}
	w.add("url = {url:String}", clickhouse.Named("url", url))
	if job != "" {
		id, err := uuid.Parse(job)
		if err != nil {
			return ArchivedPage{}, invalid("job", "not a job id (a UUID)")
		}
		w.add("crawl_id = {job:UUID}", clickhouse.Named("job", id.String()))
	}
	cols := "crawl_id, toString(job_kind), url, title, status_code, success, toString(origin), received_at, error"
	for _, c := range []struct {
		on   bool
		expr string
	}{{parts.Markdown, "markdown"}, {parts.HTML, "html"}, {parts.Document, "document"}} {
		if c.on {
			cols += ", " + c.expr
		} else {
			cols += ", ''"
		}
	}
	rows, err := r.conn.Query(ctx, "SELECT "+cols+" FROM "+r.db+".pages FINAL WHERE "+w.String()+
		" ORDER BY received_at DESC, crawl_id DESC LIMIT 1", w.args...)
	if err != nil {
		return ArchivedPage{}, readErr("page", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return ArchivedPage{}, readErr("page", err)
		}
		if job == "" {
			return ArchivedPage{}, ErrNoPage
		}
		// Its rows closed first: a query holds one of the read slots
		// until then (boundConn), and this is a second.
		rows.Close()
		if _, err := r.Page(ctx, url, "", PageParts{}); err != nil {
			return ArchivedPage{}, err
		}
		return ArchivedPage{}, fmt.Errorf("job %s: %w", job, ErrNoVersion)
	}
	var p ArchivedPage
	var doc string
	if err := rows.Scan(&p.CrawlID, &p.JobKind, &p.URL, &p.Title, &p.StatusCode, &p.Success, &p.Origin, &p.ReceivedAt, &p.Error, &p.Markdown, &p.HTML, &doc); err != nil {
		return ArchivedPage{}, readErr("page", err)
	}
	if parts.Document {
		p.Document = json.RawMessage(doc)
	}
	return p, rows.Err()
}

// HistoryEntry is one version of a URL with its change class
// (page_changes, docs/search.md).
type HistoryEntry struct {
	CrawlID      uuid.UUID
	JobKind      string
	Origin       string
	StatusCode   uint16
	ReceivedAt   time.Time
	JobStartedAt time.Time
	// Change is new, changed, same or removed.
	Change string
	// PreviousCrawlID is the job whose version it was compared with (nil
	// for new).
	PreviousCrawlID *uuid.UUID
}

// maxHistory bounds a history: one version per job that reached the URL.
const maxHistory = 1000

// History returns every version of url, oldest job first, at most the
// newest 1000. Failures other than 404/410 are no versions (they say
// nothing of the page) and are not in it. ErrNoPage when there is none.
func (r *Reader) History(ctx context.Context, url string) ([]HistoryEntry, error) {
	if url == "" || len(url) > maxURL {
		return nil, invalid("url", "must be given, at most %d bytes", maxURL)
	}
	rows, err := r.conn.Query(ctx, "SELECT * FROM (SELECT crawl_id, toString(job_kind), toString(origin), status_code, received_at, job_started_at, change, previous_crawl_id FROM "+r.db+
		".page_changes WHERE url = {url:String} ORDER BY job_started_at DESC, crawl_id DESC LIMIT {n:UInt64}) ORDER BY job_started_at, crawl_id",
		clickhouse.Named("url", url), clickhouse.Named("n", uint64(maxHistory)))
	if err != nil {
		return nil, readErr("history", err)
	}
	defer rows.Close()
	var out []HistoryEntry
	for rows.Next() {
		var h HistoryEntry
		if err := rows.Scan(&h.CrawlID, &h.JobKind, &h.Origin, &h.StatusCode, &h.ReceivedAt, &h.JobStartedAt, &h.Change, &h.PreviousCrawlID); err != nil {
			return nil, readErr("history", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, readErr("history", err)
	}
	if len(out) == 0 {
		return nil, ErrNoPage
	}
	return out, nil
}
