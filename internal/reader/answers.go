package reader

import (
	"encoding/json"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// The JSON bodies of the API (the schemas of openapi.json). Times are
// RFC 3339 in UTC with milliseconds; every text from a crawled page or the
// crawl API is given as it was stored: clients escape it where they show it.

// Hit is a search result.
type Hit struct {
	JobID      string    `json:"job_id"`
	JobKind    string    `json:"job_kind"`
	URL        string    `json:"url"`
	Host       string    `json:"host"`
	Title      string    `json:"title"`
	StatusCode uint16    `json:"status_code"`
	Success    bool      `json:"success"`
	ReceivedAt time.Time `json:"received_at"`
	Snippet    string    `json:"snippet"`
	Score      uint64    `json:"score,omitempty"`
	Change     string    `json:"change,omitempty"`
	// ChangeTracking is the crawl API's object, with changeTracking= only.
	ChangeTracking *events.ChangeTracking `json:"changeTracking,omitempty"`
}

// SearchAnswer is GET /v1/search.
type SearchAnswer struct {
	Hits []Hit  `json:"hits"`
	Next string `json:"next_cursor,omitempty"`
	// Partial: the request's budget ran out before the page was full;
	// next_cursor goes on searching (docs/search.md).
	Partial bool `json:"partial,omitempty"`
	// Count is how many versions match, on a first page (no cursor) only.
	Count *HitCount `json:"count,omitempty"`
}

// HitCount is a search's count: value, and relation eq (exactly), lte (at
// most: a phrase or a change class is checked page by page) or gt (more
// than value, the most a search counts), as the search page says it.
type HitCount struct {
	Value    uint64 `json:"value"`
	Relation string `json:"relation"`
}

// PageAnswer is GET /v1/pages with format=json.
type PageAnswer struct {
	JobID      string          `json:"job_id"`
	JobKind    string          `json:"job_kind"`
	URL        string          `json:"url"`
	Title      string          `json:"title"`
	StatusCode uint16          `json:"status_code"`
	Success    bool            `json:"success"`
	Origin     string          `json:"origin"`
	ReceivedAt time.Time       `json:"received_at"`
	Error      string          `json:"error,omitempty"`
	Markdown   string          `json:"markdown"`
	HTML       *string         `json:"html,omitempty"`
	Document   json.RawMessage `json:"document,omitempty"`
	// ChangeTracking is the crawl API's object, when asked for.
	ChangeTracking *events.ChangeTracking `json:"changeTracking,omitempty"`
}

// Version is one entry of a page's history.
type Version struct {
	JobID         string    `json:"job_id"`
	JobKind       string    `json:"job_kind"`
	Origin        string    `json:"origin"`
	StatusCode    uint16    `json:"status_code"`
	ReceivedAt    time.Time `json:"received_at"`
	JobStartedAt  time.Time `json:"job_started_at"`
	Change        string    `json:"change"`
	PreviousJobID *string   `json:"previous_job_id"`
	// ChangeTracking is the crawl API's object for this version.
	ChangeTracking *events.ChangeTracking `json:"changeTracking"`
}

// HistoryAnswer is GET /v1/pages/history.
type HistoryAnswer struct {
	URL      string    `json:"url"`
	Versions []Version `json:"versions"`
}

// DiffSide names one version of a diff.
type DiffSide struct {
	JobID      string    `json:"job_id"`
	ReceivedAt time.Time `json:"received_at"`
	StatusCode uint16    `json:"status_code"`
}

// DiffAnswer is GET /v1/pages/diff: the unified diff of the two versions'
// markdown.
type DiffAnswer struct {
	URL     string   `json:"url"`
	From    DiffSide `json:"from"`
	To      DiffSide `json:"to"`
	Changed bool     `json:"changed"`
	Unified string   `json:"unified"`
	// ChangeTracking is the crawl API's object of To against From, with
	// the git-diff mode's diff when the text changed.
	ChangeTracking *events.ChangeTracking `json:"changeTracking"`
}

// Job is a row of the crawls view.
type Job struct {
	JobID           string     `json:"job_id"`
	Kind            string     `json:"kind"`
	FirstDeliveryAt *time.Time `json:"first_delivery_at"`
	LastDeliveryAt  *time.Time `json:"last_delivery_at"`
	PagesReceived   uint64     `json:"pages_received"`
	PagesBackfilled uint64     `json:"pages_backfilled"`
	Failures        uint64     `json:"failures"`
	CancelledPages  uint64     `json:"cancelled_pages"`
	LastEvent       string     `json:"last_event"`
	BackfillState   string     `json:"backfill_state"`
}

// JobsAnswer is GET /v1/jobs.
type JobsAnswer struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next_cursor,omitempty"`
}

// ErrorCount is one of a job's most frequent errors.
type ErrorCount struct {
	Error string `json:"error"`
	Pages uint64 `json:"pages"`
}

// JobAnswer is GET /v1/jobs/{id}: what `sink status` prints.
type JobAnswer struct {
	Job
	SuccessfulPages uint64       `json:"successful_pages"`
	TopErrors       []ErrorCount `json:"top_errors"`
	// Changes is the job's change summary as published on crawl.changes
	// (summary.Job), read when asked; absent from `sink status --json`.
	Changes json.RawMessage `json:"changes,omitempty"`
	// ChangesOmitted, when the summary could not be read within the read
	// limits or the archive was busy, is the error code that query would
	// have answered (query_limit, overloaded); the rest of the job stands.
	ChangesOmitted string `json:"changesOmitted,omitempty"`
}

// Failure is a failed page of a job.
type Failure struct {
	URL        string    `json:"url"`
	StatusCode uint16    `json:"status_code"`
	Error      string    `json:"error"`
	Reason     string    `json:"reason"`
	ReceivedAt time.Time `json:"received_at"`
}

// FailuresAnswer is GET /v1/jobs/{id}/failures (and /cancelled).
type FailuresAnswer struct {
	Failures []Failure `json:"failures"`
	Next     string    `json:"next_cursor,omitempty"`
}

// BlockedAnswer is GET /v1/jobs/{id}/blocked.
type BlockedAnswer struct {
	URLs []string `json:"urls"`
	Next string   `json:"next_cursor,omitempty"`
}

// Change is an item of the changes feed.
type Change struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	JobID      string `json:"job_id"`
	JobKind    string `json:"job_kind"`
	URL        string `json:"url"`
	StatusCode uint16 `json:"status_code"`
	Title      string `json:"title,omitempty"`
	Error      string `json:"error,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Change is a page's change class; absent for a failure.
	Change     string    `json:"change,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	InsertedAt time.Time `json:"inserted_at"`
	// ChangeTracking is the crawl API's object of a page that is a
	// version, with changeTracking= only.
	ChangeTracking *events.ChangeTracking `json:"changeTracking,omitempty"`
}

// ChangesAnswer is GET /v1/changes. next_cursor is always set: poll with
// it.
type ChangesAnswer struct {
	Changes []Change `json:"changes"`
	Next    string   `json:"next_cursor"`
}

func jobOf(c archive.Crawl) Job {
	return Job{JobID: c.CrawlID.String(), Kind: c.Kind, FirstDeliveryAt: c.FirstDeliveryAt, LastDeliveryAt: c.LastDeliveryAt,
		PagesReceived: c.PagesReceived, PagesBackfilled: c.PagesBackfilled, Failures: c.Failures, CancelledPages: c.CancelledPages,
		LastEvent: c.LastEvent, BackfillState: c.BackfillState}
}
