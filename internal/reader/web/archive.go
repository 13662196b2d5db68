package web

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Archive is what the pages read: the read side of the archive, as the read
// API's query layer answers it. Every method only reads. Text fields hold
// crawled content as it was archived: hostile, made safe only when rendered
// (render.go).
type Archive interface {
	// Jobs lists jobs, newest delivery first, a page at a time.
	Jobs(ctx context.Context, q JobsQuery) (JobList, error)
	// Job returns one job; ErrNotFound when the archive has never seen it.
	Job(ctx context.Context, id string) (Job, error)
	// Failures lists a job's failed and cancelled pages, newest first, a
	// page at a time.
	Failures(ctx context.Context, q FailuresQuery) (FailureList, error)
	// Blocked lists the URLs of a job that robots.txt kept the crawler
	// from, by URL, a page at a time.
	Blocked(ctx context.Context, q BlockedQuery) (BlockedList, error)
	// Search finds page versions whose text matches q.Text.
	Search(ctx context.Context, q SearchQuery) (SearchResults, error)
	// Page returns the version of url that job holds (the newest version
	// when job is ""), with every archived version of the URL. ErrNotFound
	// when there is no such version.
	Page(ctx context.Context, url, job string) (Page, error)
	// Diff compares two versions of url (the latest two when both jobs are
	// ""). ErrNotFound when a version is missing.
	Diff(ctx context.Context, url, fromJob, toJob string) (Diff, error)
}

// Outcomes of an Archive that the pages answer apart.
var (
	// ErrNotFound: the archive holds no such job, page or version (404).
	ErrNotFound = errors.New("not in the archive")
	// ErrTooCostly: the query went past the archive's per-query limits
	// (503; a narrower query may pass).
	ErrTooCostly = errors.New("the query went past the archive's limits")
	// ErrBusy: the archive runs as many read queries as it allows at once
	// (query.ErrBusy).
	ErrBusy = errors.New("the archive is running as many reads as it allows at once")
)

// InvalidError is a request parameter the pages or the Archive refuse; the
// pages answer 400 naming the parameter.
type InvalidError struct {
	Param  string
	Reason string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("parameter %s: %s", e.Param, e.Reason) }

// Change classes of a page version against the same URL in the job before
// (the page_changes view); "" where a version has none (a failed fetch).
const (
	ChangeNew     = "new"
	ChangeSame    = "same"
	ChangeChanged = "changed"
	ChangeRemoved = "removed"
)

// JobsQuery selects a page of jobs. Cursor is the Next of the previous page.
type JobsQuery struct {
	Kind   string
	Cursor string
	Limit  int
}

// JobList is one page of jobs. Next is "" on the last page.
type JobList struct {
	Jobs []Job
	Next string
}

// Job is one job (crawl or batch scrape) as the archive knows it: its row of
// the crawls view and, for one job, its most frequent errors.
type Job struct {
	ID              string
	Kind            string
	FirstDeliveryAt *time.Time
	LastDeliveryAt  *time.Time
	PagesReceived   uint64
	PagesBackfilled uint64
	SuccessfulPages uint64
	Failures        uint64
	CancelledPages  uint64
	LastEvent       string
	BackfillState   string
	// TopErrors is filled by Job only.
	TopErrors []ErrorCount
}

// ErrorCount is one error text and how many pages failed with it.
type ErrorCount struct {
	Error string
	Pages uint64
}

// FailuresQuery selects a page of a job's failures; Reason "" is every
// reason.
type FailuresQuery struct {
	Job    string
	Reason string
	Cursor string
	Limit  int
}

// FailureList is one page of failures. Next is "" on the last page.
type FailureList struct {
	Failures []Failure
	Next     string
}

// Failure is one failed or cancelled page of a job.
type Failure struct {
	URL        string
	StatusCode uint16
	// Reason is events.ReasonFailed or events.ReasonCancelled; Error is
	// the text the crawl API gave.
	Reason     string
	Error      string
	ReceivedAt time.Time
}

// BlockedQuery selects a page of a job's robots-blocked URLs.
type BlockedQuery struct {
	Job    string
	Cursor string
	Limit  int
}

// BlockedList is one page of blocked URLs. Next is "" on the last page.
type BlockedList struct {
	URLs []string
	Next string
}

// Search orders.
const (
	OrderNewest    = "newest"
	OrderRelevance = "relevance"
)

// SearchQuery is a search: words and "quoted phrases" in Text, and
// filters. Zero values do not filter. Since is inclusive, Until exclusive;
// StatusMin and StatusMax are inclusive.
type SearchQuery struct {
	Text      string
	Job       string
	Kind      string
	Host      string
	Since     time.Time
	Until     time.Time
	StatusMin uint16
	StatusMax uint16
	Change    string
	Order     string
	Cursor    string
	Limit     int
}

// SearchResults is one page of hits. Next is "" on the last page.
type SearchResults struct {
	Hits []Hit
	Next string
	// Partial: the search's budget ran out before the page was full; Next
	// searches on.
	Partial bool
}

// Hit is one page version that matched. Snippet is plain text of the page
// around the first match; the pages mark the query's words in it.
type Hit struct {
	URL        string
	JobID      string
	Title      string
	StatusCode uint16
	Change     string
	ReceivedAt time.Time
	Snippet    string
}

// Page is one archived version of a URL and the list of all its versions.
type Page struct {
	URL        string
	JobID      string
	Title      string
	Success    bool
	StatusCode uint16
	Error      string
	// Origin is how it was archived: webhook or backfill.
	Origin     string
	ReceivedAt time.Time
	Markdown   string
	HTML       string
	// Versions are every archived version of the URL, newest first.
	Versions []Version
}

// Version is one archived version of a URL in a page's history.
type Version struct {
	JobID      string
	ReceivedAt time.Time
	StatusCode uint16
	Success    bool
	// Change is the version's class; PreviousJobID the job of the version
	// it was compared with ("" for a new page).
	Change        string
	PreviousJobID string
}

// Diff is the line diff of two versions of a URL's markdown.
type Diff struct {
	URL  string
	From Version
	To   Version
	// Lines are the diff's lines in order; Coarse when past its limits some
	// changed blocks are shown whole (textdiff.Result.Coarse).
	Lines  []DiffLine
	Coarse bool
}

// DiffLine is one line of a diff: Op is ' ' (in both), '-' (old only) or
// '+' (new only).
type DiffLine struct {
	Op   byte
	Text string
}
