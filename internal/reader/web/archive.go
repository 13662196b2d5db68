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
	// Failures lists failed, cancelled and robots-blocked pages, newest
	// first, a page at a time.
	Failures(ctx context.Context, q FailuresQuery) (FailureList, error)
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

// ErrNotFound is what an Archive returns for a job, page or version it does
// not hold; the pages answer 404.
var ErrNotFound = errors.New("not in the archive")

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

// FailuresQuery selects a page of failures; Job "" means every job.
type FailuresQuery struct {
	Job    string
	Cursor string
	Limit  int
}

// FailureList is one page of failures. Next is "" on the last page.
type FailureList struct {
	Failures []Failure
	Next     string
}

// Failure is one failed, cancelled or robots-blocked page.
type Failure struct {
	JobID      string
	URL        string
	StatusCode uint16
	// Reason classifies it (failed, cancelled, robots…), Error is the text
	// the crawl API gave.
	Reason     string
	Error      string
	ReceivedAt time.Time
}

// Search orders.
const (
	OrderNewest    = "newest"
	OrderRelevance = "relevance"
)

// SearchQuery is a search: tokens and "quoted phrases" in Text, and filters.
// Zero values do not filter.
type SearchQuery struct {
	Text   string
	Job    string
	Kind   string
	Host   string
	Since  time.Time
	Until  time.Time
	Status int
	Change string
	Order  string
	Cursor string
	Limit  int
}

// SearchResults is one page of hits. Next is "" on the last page.
type SearchResults struct {
	Hits []Hit
	Next string
}

// Hit is one page version that matched, with snippets around the matches.
type Hit struct {
	URL        string
	JobID      string
	Title      string
	StatusCode uint16
	Change     string
	ReceivedAt time.Time
	Snippets   []Snippet
}

// Snippet is a piece of a page's text around matches, cut into spans; a
// span with Match set is a matched token or phrase. Spans are plain text:
// the pages escape them.
type Snippet []Span

// Span is a run of snippet text.
type Span struct {
	Text  string
	Match bool
}

// Page is one archived version of a URL and the list of all its versions.
type Page struct {
	URL        string
	JobID      string
	Title      string
	Success    bool
	StatusCode uint16
	Error      string
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
