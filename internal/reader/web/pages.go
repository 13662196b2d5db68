package web

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/clip"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/textdiff"
	"github.com/google/uuid"
)

// The pages: each reads its parameters, asks the archive (reader.Archive,
// the read API's queries), and builds what its template shows from the
// archive's answers. Parameters are checked here, before the archive is
// asked; the archive may refuse more (query.ParamError). Errors are
// answered by Fail.

// jobsPage is the data of the jobs list.
type jobsPage struct {
	Kind string
	List query.JobsPage
	// Counts are each listed job's URLs by change class (none: nothing
	// classed), as its change summary counts them.
	Counts map[uuid.UUID]query.ChangeCounts
	// CountsOmitted says why the counts are left out ("" when shown): the
	// list stands without them when they pass the read limits or the
	// archive is busy, as a job's answer stands without its summary.
	CountsOmitted string
}

func (s *Server) jobs(r *http.Request) (string, any, error) {
	p := paramsOf(r)
	q := query.JobsQuery{Kind: p.kind("kind"), Cursor: p.text("cursor", maxLinkBytes), Limit: p.limit()}
	if p.err != nil {
		return "", nil, p.err
	}
	list, err := s.archive.Jobs(r.Context(), q)
	if err != nil {
		return "", nil, err
	}
	ids := make([]uuid.UUID, 0, len(list.Jobs))
	for _, j := range list.Jobs {
		ids = append(ids, j.CrawlID)
	}
	data := jobsPage{Kind: q.Kind, List: list}
	counting, cancel := halfTheTimeLeft(r.Context())
	defer cancel()
	data.Counts, err = s.archive.JobsChangeCounts(counting, ids)
	switch {
	case errors.Is(err, query.ErrLimit) || errors.Is(err, query.ErrBusy):
		data.CountsOmitted = reader.OutcomeOf(r.Context(), err).Message
	case err != nil && counting.Err() != nil && r.Context().Err() == nil:
		data.CountsOmitted = "counting took longer than its share of this page's time"
	case err != nil:
		return "", nil, err
	}
	return "jobs", data, nil
}

// halfTheTimeLeft is ctx with half the time left to its deadline (the
// request's, READER_REQUEST_MAX_TIME), for a part of a page the page can
// stand without: past it, the rest of the page still has time to answer.
// Without a deadline it is ctx.
func halfTheTimeLeft(ctx context.Context) (context.Context, context.CancelFunc) {
	end, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(end)/2)
}

// jobPage is the data of one job's page: its status and what it changed
// against the jobs before it, counted as its change summary counts them
// (query.Reader.JobChanges, which internal/changes publishes).
type jobPage struct {
	query.JobStatus
	Changes query.JobChanges
	// Exports are the formats of the read API's export of the job.
	Exports []string
}

func (s *Server) job(r *http.Request) (string, any, error) {
	p := &params{values: url.Values{"id": {r.PathValue("id")}}}
	id := p.job("id")
	if p.err == nil && id == "" {
		p.invalid("id", "missing")
	}
	if p.err != nil {
		return "", nil, p.err
	}
	job, err := s.archive.JobStatus(r.Context(), id, topErrors)
	if err != nil {
		return "", nil, err
	}
	// The counts link to the search of each class; the URLs removed are
	// listed too, as a URL the job no longer found is no version of it
	// that a search could show.
	changes, err := s.archive.JobChanges(r.Context(), id, query.ChangeQuery{MaxURLs: shownRemovals})
	if err != nil {
		return "", nil, err
	}
	return "job", jobPage{JobStatus: job, Changes: changes, Exports: exportFormats}, nil
}

// shownRemovals is how many removed URLs a job's page lists.
const shownRemovals = 50

// exportFormats are the formats of GET /v1/jobs/{id}/export.
var exportFormats = []string{"ndjson", "parquet", "warc", "cdxj", "wacz"}

// topErrors is how many of a job's most frequent errors its page shows.
const topErrors = 10

// failuresPage is the data of the failures page: without a job, the
// recent jobs that have failures; with one, its failures and, on the first
// page, its robots-blocked URLs.
type failuresPage struct {
	Job     string
	Reason  string
	Reasons []string
	List    query.FailuresPage
	Blocked query.BlockedPage
	// Jobs are the recent jobs with failures, when no job is chosen.
	Jobs []archive.Crawl
}

// failureJobs is how many recent jobs the failures page looks through for
// jobs with failures when none is chosen.
const failureJobs = 100

func (s *Server) failures(r *http.Request) (string, any, error) {
	p := paramsOf(r)
	q := query.FailuresQuery{
		Job:    p.job("job"),
		Reason: p.oneOf("reason", events.ReasonFailed, events.ReasonCancelled),
		Cursor: p.text("cursor", maxLinkBytes),
		Limit:  p.limit(),
	}
	if p.err != nil {
		return "", nil, p.err
	}
	data := failuresPage{Job: q.Job, Reason: q.Reason, Reasons: []string{events.ReasonFailed, events.ReasonCancelled}}
	if q.Job == "" {
		jobs, err := s.archive.Jobs(r.Context(), query.JobsQuery{Limit: failureJobs})
		if err != nil {
			return "", nil, err
		}
		for _, j := range jobs.Jobs {
			if j.Failures > 0 || j.CancelledPages > 0 {
				data.Jobs = append(data.Jobs, j)
			}
		}
		return "failures", data, nil
	}
	var err error
	if data.List, err = s.archive.Failures(r.Context(), q); err != nil {
		return "", nil, err
	}
	if q.Cursor == "" {
		if data.Blocked, err = s.archive.Blocked(r.Context(), query.BlockedQuery{Job: q.Job, Limit: maxLimit}); err != nil {
			return "", nil, err
		}
	}
	return "failures", data, nil
}

// searchPage is the data of the search form and its results; Searched is
// false until a query was given.
type searchPage struct {
	Query    query.SearchQuery
	Searched bool
	Results  query.SearchPage
	// Snippets are the hits' snippets with the query's words marked.
	Snippets [][]span
	// Count says how many versions match, on the first page.
	Count string
	// Refused is why the archive refused the query's text ("" when it
	// did not).
	Refused string
	Kinds   []string
	Changes []string
}

func (s *Server) search(r *http.Request) (string, any, error) {
	p := paramsOf(r)
	q := query.SearchQuery{
		Text:   p.text("q", maxTextBytes),
		Job:    p.job("job"),
		Kind:   p.kind("kind"),
		Host:   p.text("host", maxHostBytes),
		Change: p.oneOf("change", changeClasses...),
		Order:  p.oneOf("order", query.OrderNewest, query.OrderRelevance),
		Cursor: p.text("cursor", maxLinkBytes),
		Limit:  p.limit(),
		Count:  true,
	}
	q.From, q.To = p.span("since", "until")
	q.StatusMin, q.StatusMax = p.status("status")
	if p.err != nil {
		return "", nil, p.err
	}
	data := searchPage{
		Query:   q,
		Kinds:   []string{events.KindCrawl, events.KindBatchScrape},
		Changes: changeClasses,
	}
	if q.Text == "" && q.Job == "" && q.Host == "" {
		// Nothing asked yet: the form alone.
		return "search", data, nil
	}
	res, err := s.archive.Search(r.Context(), q)
	var refused *query.ParamError
	if errors.As(err, &refused) && refused.Param == "q" {
		// The form again, with what of the query the search does not take.
		data.Refused = refused.Reason
		return "", nil, &shownError{name: "search", data: data, err: err}
	}
	if err != nil {
		return "", nil, err
	}
	data.Searched, data.Results, data.Count = true, res, countText(res, q.Cursor)
	for _, h := range res.Hits {
		data.Snippets = append(data.Snippets, highlight(h.Snippet, q.Text))
	}
	return "search", data, nil
}

// countText says how many versions a search's first page says match ("" on
// later pages): exactly, or at most the versions holding every word when a
// phrase or a change class is checked as the pages are read.
func countText(res query.SearchPage, cursor string) string {
	if cursor != "" {
		return ""
	}
	switch n, rel := res.Counted(); {
	case rel == query.CountMoreThan:
		return fmt.Sprintf("More than %d matches", n)
	case rel == query.CountExactly && n == 1:
		return "1 match"
	case rel == query.CountExactly:
		return fmt.Sprintf("%d matches", n)
	default:
		return fmt.Sprintf("At most %d matches (the pages holding every word; the phrase or change is checked as results are read)", n)
	}
}

// changeClasses are the classes a version may have against the same URL
// in the job before (page_changes), as the search form offers them.
var changeClasses = events.ChangeClasses()

// pagePage is the data of one page version.
type pagePage struct {
	Page query.ArchivedPage
	// History is every archived version of the URL, newest first.
	History []query.HistoryEntry
	// Rendered is the sanitised markdown; RenderedOK false when it was
	// not rendered (too large, past its budget or deadline: render.go)
	// and the markdown is shown as text instead.
	Rendered   template.HTML
	RenderedOK bool
	// Markdown and HTML are the sources shown, cut at maxShownSource;
	// Cut says one was.
	Markdown, HTML string
	Cut            bool
	// Sandboxed is the html as the sandbox shows it (renderer.sandboxed),
	// "" when there is none or it is too large to render.
	Sandboxed string
	// Document is the Document as the crawl API sent it, shown as text,
	// cut at maxShownSource.
	Document string
	// Changes is the diff with the version before this one (Previous),
	// shown in place; nil without one.
	Previous *query.Version
	Changes  []hunk
	Coarse   bool
}

// A page's sources are shown up to maxShownSource bytes each, and its html
// rendered in the sandbox up to maxSandboxedHTML: a crawled page can be
// tens of megabytes, which no reader reads in a browser tab (the read API
// serves it whole).
const (
	maxShownSource   = 1 << 20
	maxSandboxedHTML = 4 << 20
)

func (s *Server) page(r *http.Request) (string, any, error) {
	p := paramsOf(r)
	pageURL, job := p.requiredURL("url"), p.job("job")
	if p.err != nil {
		return "", nil, p.err
	}
	pg, err := s.archive.Page(r.Context(), pageURL, job, query.PageParts{Markdown: true, HTML: true, Document: true})
	if err != nil {
		return "", nil, err
	}
	history, err := s.history(r.Context(), pageURL)
	if err != nil {
		return "", nil, err
	}
	data := pagePage{Page: pg, History: history}
	if err := s.previous(r.Context(), &data); err != nil {
		return "", nil, err
	}
	if pg.HTML != "" && len(pg.HTML) <= maxSandboxedHTML {
		data.Sandboxed = s.render.sandboxed(pg.HTML)
	}
	if pg.Markdown != "" {
		var err error
		if data.Rendered, err = s.render.markdown(r.Context(), pg.Markdown); err != nil {
			if r.Context().Err() != nil {
				return "", nil, r.Context().Err()
			}
			s.log.Warn().Err(err).Str("job", pg.CrawlID.String()).Int("bytes", len(pg.Markdown)).Msg("web markdown shown as text")
		}
		data.RenderedOK = err == nil
	}
	var cutMD, cutHTML bool
	data.Markdown, cutMD = clip.Prefix(pg.Markdown, maxShownSource)
	data.HTML, cutHTML = clip.Prefix(pg.HTML, maxShownSource)
	var cutDoc bool
	data.Document, cutDoc = clip.Prefix(string(pg.Document), maxShownSource)
	data.Cut = cutMD || cutHTML || cutDoc
	return "page", data, nil
}

// previous sets the diff of the page's version with the one before it, as
// its history names it: what changed, shown where the version is read.
func (s *Server) previous(ctx context.Context, data *pagePage) error {
	for _, h := range data.History {
		if h.CrawlID != data.Page.CrawlID || h.PreviousCrawlID == nil {
			continue
		}
		older, newer, err := s.archive.Versions(ctx, data.Page.URL, h.PreviousCrawlID.String(), h.CrawlID.String())
		if err != nil {
			return err
		}
		d := textdiff.Diff(older.Markdown, newer.Markdown)
		data.Previous, data.Changes, data.Coarse = &older, diffView(d.Edits, diffContext), d.Coarse
	}
	return nil
}

// history is every version of url, newest first; none for a URL whose
// versions are all failures (they are no versions of its content).
func (s *Server) history(ctx context.Context, url string) ([]query.HistoryEntry, error) {
	h, err := s.archive.History(ctx, url)
	if errors.Is(err, query.ErrNoPage) {
		return nil, nil
	}
	slices.Reverse(h)
	return h, err
}

// diffPage is the data of a diff: the two versions, the newer one's
// change class and the job it was compared with, and the lines of the
// diff cut into hunks (Coarse: past textdiff's limits some changed blocks
// are shown whole).
type diffPage struct {
	URL      string
	From, To query.Version
	Change   string
	Hunks    []hunk
	Coarse   bool
}

func (s *Server) diff(r *http.Request) (string, any, error) {
	p := paramsOf(r)
	pageURL, from, to := p.requiredURL("url"), p.job("from"), p.job("to")
	if p.err != nil {
		return "", nil, p.err
	}
	older, newer, err := s.archive.Versions(r.Context(), pageURL, from, to)
	if err != nil {
		return "", nil, err
	}
	// The newer version's class, as its history shows it.
	history, err := s.history(r.Context(), pageURL)
	if err != nil {
		return "", nil, err
	}
	data := diffPage{URL: pageURL, From: older, To: newer}
	for _, v := range history {
		if v.CrawlID == newer.CrawlID {
			data.Change = v.Change
		}
	}
	d := textdiff.Diff(older.Markdown, newer.Markdown)
	data.Hunks, data.Coarse = diffView(d.Edits, diffContext), d.Coarse
	return "diff", data, nil
}

// diffContext is how many unchanged lines a diff shows around each change,
// as `diff -u`.
const diffContext = 3

// hunks cuts a diff's lines into runs of changes with up to context
// unchanged lines around each, as index ranges [start, end) of lines;
// unchanged lines further from any change are left out. No change gives
// no hunk.
func hunks(lines []textdiff.Edit, context int) [][2]int {
	keep := make([]bool, len(lines))
	for i, l := range lines {
		if l.Op == textdiff.Equal {
			continue
		}
		for j := max(i-context, 0); j <= min(i+context, len(lines)-1); j++ {
			keep[j] = true
		}
	}
	var out [][2]int
	start := -1
	for i := range lines {
		switch {
		case keep[i] && start < 0:
			start = i
		case !keep[i] && start >= 0:
			out, start = append(out, [2]int{start, i}), -1
		}
	}
	if start >= 0 {
		out = append(out, [2]int{start, len(lines)})
	}
	return out
}
