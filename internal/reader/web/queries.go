package web

import (
	"context"
	"errors"
	"fmt"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	archivequery "github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/textdiff"
)

// Queries are the archive's read queries the pages use: those of
// archivequery.Reader that the read API's JSON answers come from. The pages add
// no query of their own, so every limit of the read API holds for them.
type Queries interface {
	Search(ctx context.Context, q archivequery.SearchQuery) (archivequery.SearchPage, error)
	Page(ctx context.Context, url, job string, parts archivequery.PageParts) (archivequery.ArchivedPage, error)
	History(ctx context.Context, url string) ([]archivequery.HistoryEntry, error)
	Versions(ctx context.Context, url, fromJob, toJob string) (from, to archivequery.Version, err error)
	Jobs(ctx context.Context, q archivequery.JobsQuery) (archivequery.JobsPage, error)
	JobStatus(ctx context.Context, crawlID string, topErrors int) (archivequery.JobStatus, error)
	Failures(ctx context.Context, q archivequery.FailuresQuery) (archivequery.FailuresPage, error)
	Blocked(ctx context.Context, q archivequery.BlockedQuery) (archivequery.BlockedPage, error)
}

var _ Queries = (*archivequery.Reader)(nil)

// queriesArchive is the pages' Archive over the archive's read queries.
type queriesArchive struct {
	r Queries
}

var _ Archive = queriesArchive{}

// NewArchive returns the pages' Archive over q, usually an archivequery.Reader
// configured for the read API (WithReadOptions).
func NewArchive(q Queries) (Archive, error) {
	if q == nil {
		return nil, errors.New("web: nil archive queries")
	}
	return queriesArchive{r: q}, nil
}

// topErrors is how many of a job's most frequent errors its page shows.
const topErrors = 10

// formParams renames the query layer's parameters to the names of the
// pages' forms, so that a refusal names the field the reader filled in.
var formParams = map[string]string{"from": "since", "to": "until"}

// pagesErr turns an error of the query layer into the pages' vocabulary.
func pagesErr(err error) error {
	var pe *archivequery.ParamError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		name := pe.Param
		if n, ok := formParams[name]; ok {
			name = n
		}
		return &InvalidError{Param: name, Reason: pe.Reason}
	case archivequery.IsNotFound(err), errors.Is(err, archivequery.ErrOneVersion):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, archivequery.ErrLimit):
		return fmt.Errorf("%w: %w", ErrTooCostly, err)
	case errors.Is(err, archivequery.ErrBusy):
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return err
}

func jobOf(c archive.Crawl) Job {
	return Job{
		ID:              c.CrawlID.String(),
		Kind:            c.Kind,
		FirstDeliveryAt: c.FirstDeliveryAt,
		LastDeliveryAt:  c.LastDeliveryAt,
		PagesReceived:   c.PagesReceived,
		PagesBackfilled: c.PagesBackfilled,
		Failures:        c.Failures,
		CancelledPages:  c.CancelledPages,
		LastEvent:       c.LastEvent,
		BackfillState:   c.BackfillState,
	}
}

func (a queriesArchive) Jobs(ctx context.Context, q JobsQuery) (JobList, error) {
	page, err := a.r.Jobs(ctx, archivequery.JobsQuery{Kind: q.Kind, Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		return JobList{}, pagesErr(err)
	}
	out := JobList{Next: page.Next}
	for _, c := range page.Jobs {
		out.Jobs = append(out.Jobs, jobOf(c))
	}
	return out, nil
}

func (a queriesArchive) Job(ctx context.Context, id string) (Job, error) {
	st, err := a.r.JobStatus(ctx, id, topErrors)
	if err != nil {
		return Job{}, pagesErr(err)
	}
	j := jobOf(st.Crawl)
	j.SuccessfulPages = st.SuccessfulPages
	for _, e := range st.TopErrors {
		j.TopErrors = append(j.TopErrors, ErrorCount{Error: e.Error, Pages: e.Pages})
	}
	return j, nil
}

func (a queriesArchive) Failures(ctx context.Context, q FailuresQuery) (FailureList, error) {
	page, err := a.r.Failures(ctx, archivequery.FailuresQuery{Job: q.Job, Reason: q.Reason, Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		return FailureList{}, pagesErr(err)
	}
	out := FailureList{Next: page.Next}
	for _, f := range page.Failures {
		out.Failures = append(out.Failures, Failure{URL: f.URL, StatusCode: f.StatusCode, Reason: f.Reason, Error: f.Error, ReceivedAt: f.ReceivedAt})
	}
	return out, nil
}

func (a queriesArchive) Blocked(ctx context.Context, q BlockedQuery) (BlockedList, error) {
	page, err := a.r.Blocked(ctx, archivequery.BlockedQuery{Job: q.Job, Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		return BlockedList{}, pagesErr(err)
	}
	return BlockedList{URLs: page.URLs, Next: page.Next}, nil
}

func (a queriesArchive) Search(ctx context.Context, q SearchQuery) (SearchResults, error) {
	page, err := a.r.Search(ctx, archivequery.SearchQuery{
		Text: q.Text, Job: q.Job, Kind: q.Kind, Host: q.Host,
		From: q.Since, To: q.Until, StatusMin: q.StatusMin, StatusMax: q.StatusMax,
		Change: q.Change, Order: q.Order, Limit: q.Limit, Cursor: q.Cursor,
	})
	if err != nil {
		return SearchResults{}, pagesErr(err)
	}
	out := SearchResults{Next: page.Next, Partial: page.Partial}
	for _, h := range page.Hits {
		out.Hits = append(out.Hits, Hit{
			URL: h.URL, JobID: h.CrawlID.String(), Title: h.Title, StatusCode: h.StatusCode,
			Change: h.Change, ReceivedAt: h.ReceivedAt, Snippet: h.Snippet,
		})
	}
	return out, nil
}

// history is every version of url, newest first; none for a URL whose
// versions are all failures (they are no versions of its content).
func (a queriesArchive) history(ctx context.Context, url string) ([]Version, error) {
	entries, err := a.r.History(ctx, url)
	if errors.Is(err, archivequery.ErrNoPage) {
		return nil, nil
	}
	if err != nil {
		return nil, pagesErr(err)
	}
	out := make([]Version, 0, len(entries))
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		v := Version{JobID: e.CrawlID.String(), ReceivedAt: e.ReceivedAt, StatusCode: e.StatusCode,
			Success: e.StatusCode < 400, Change: e.Change}
		if e.PreviousCrawlID != nil {
			v.PreviousJobID = e.PreviousCrawlID.String()
		}
		out = append(out, v)
	}
	return out, nil
}

func (a queriesArchive) Page(ctx context.Context, url, job string) (Page, error) {
	p, err := a.r.Page(ctx, url, job, archivequery.PageParts{Markdown: true, HTML: true})
	if err != nil {
		return Page{}, pagesErr(err)
	}
	versions, err := a.history(ctx, url)
	if err != nil {
		return Page{}, err
	}
	return Page{
		URL: p.URL, JobID: p.CrawlID.String(), Title: p.Title, Success: p.Success, StatusCode: p.StatusCode,
		Error: p.Error, Origin: p.Origin, ReceivedAt: p.ReceivedAt, Markdown: p.Markdown, HTML: p.HTML,
		Versions: versions,
	}, nil
}

func (a queriesArchive) Diff(ctx context.Context, url, fromJob, toJob string) (Diff, error) {
	from, to, err := a.r.Versions(ctx, url, fromJob, toJob)
	if err != nil {
		return Diff{}, pagesErr(err)
	}
	d := Diff{
		URL:  url,
		From: Version{JobID: from.CrawlID.String(), ReceivedAt: from.ReceivedAt, StatusCode: from.StatusCode, Success: from.Success},
		To:   Version{JobID: to.CrawlID.String(), ReceivedAt: to.ReceivedAt, StatusCode: to.StatusCode, Success: to.Success},
	}
	// The newer version's class, as its history shows it.
	versions, err := a.history(ctx, url)
	if err != nil {
		return Diff{}, err
	}
	for _, v := range versions {
		if v.JobID == d.To.JobID {
			d.To.Change, d.To.PreviousJobID = v.Change, v.PreviousJobID
		}
	}
	r := textdiff.Diff(from.Markdown, to.Markdown)
	d.Coarse = r.Coarse
	d.Lines = make([]DiffLine, len(r.Edits))
	for i, e := range r.Edits {
		d.Lines[i] = DiffLine{Op: byte(e.Op), Text: e.Line}
	}
	return d, nil
}
