// Package archivetest is the fake of the reader's one read interface
// (reader.Archive): an archive in memory, for the tests of the reader's
// HTTP side (internal/reader: status codes, bodies, the error table,
// deadlines, slots) and of its web pages (internal/reader/web: rendering,
// escaping, parameters). It answers with the archive's own types and
// sentinels, as query.Reader does, over a few jobs and pages a test
// adds; the queries themselves (SQL, limits, cursors, paging) are the
// archive's, tested against ClickHouse in internal/archive, and the reader
// over the real archive in internal/readercmd.
//
// Hold, when set, runs at the start of every method: a test blocks a
// request there (until the context ends, or until it opens a gate) or
// makes every method fail.
package archivetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/google/uuid"
)

// Archive is an in-memory reader.Archive. Add what it holds before the
// requests; it is safe for concurrent use.
type Archive struct {
	// Hold runs at the start of every method with its context and name
	// ("Search", "ExportNDJSON", …); an error it returns is the method's.
	Hold func(ctx context.Context, method string) error

	mu       sync.Mutex
	jobs     []query.JobStatus
	pages    []query.ArchivedPage // one per URL and job
	failures map[uuid.UUID][]query.FailedPage
	blocked  map[uuid.UUID][]string
	scopes   map[uuid.UUID]string
	removals map[query.VersionKey]uuid.UUID // by the removing job: the compared job
}

var _ reader.Archive = (*Archive)(nil)

// AddJob adds a job, its row of the crawls view and its status.
func (a *Archive) AddJob(j query.JobStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.jobs = append(a.jobs, j)
}

// AddPage adds the version of p.URL that job p.CrawlID holds.
func (a *Archive) AddPage(p query.ArchivedPage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pages = append(a.pages, p)
}

// AddScope sets the scope job's webhook metadata names.
func (a *Archive) AddScope(job uuid.UUID, scope string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.scopes == nil {
		a.scopes = map[uuid.UUID]string{}
	}
	a.scopes[job] = scope
}

// AddFailure adds a failed (or cancelled) page of job.
func (a *Archive) AddFailure(job uuid.UUID, f query.FailedPage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failures == nil {
		a.failures = map[uuid.UUID][]query.FailedPage{}
	}
	a.failures[job] = append(a.failures[job], f)
}

// AddBlocked adds URLs of job that robots.txt kept the crawler from.
func (a *Archive) AddBlocked(job uuid.UUID, urls ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.blocked == nil {
		a.blocked = map[uuid.UUID][]string{}
	}
	a.blocked[job] = append(a.blocked[job], urls...)
}

// begin runs Hold, then locks the archive for the method.
func (a *Archive) begin(ctx context.Context, method string) (unlock func(), err error) {
	if a.Hold != nil {
		if err := a.Hold(ctx, method); err != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	return a.mu.Unlock, nil
}

// jobID parses a job parameter as the archive does.
func jobID(param, job string) (uuid.UUID, error) {
	id, err := uuid.Parse(job)
	if err != nil {
		return uuid.Nil, &query.ParamError{Param: param, Reason: "not a job id (a UUID)"}
	}
	return id, nil
}

// Jobs lists the jobs of q.Kind, newest first delivery first; one page.
func (a *Archive) Jobs(ctx context.Context, q query.JobsQuery) (query.JobsPage, error) {
	unlock, err := a.begin(ctx, "Jobs")
	if err != nil {
		return query.JobsPage{}, err
	}
	defer unlock()
	var out query.JobsPage
	for _, j := range a.jobs {
		if q.Kind == "" || j.Kind == q.Kind {
			out.Jobs = append(out.Jobs, j.Crawl)
		}
	}
	slices.SortStableFunc(out.Jobs, func(x, y archive.Crawl) int { return first(y).Compare(first(x)) })
	return out, nil
}

func first(c archive.Crawl) time.Time {
	if c.FirstDeliveryAt == nil {
		return time.Time{}
	}
	return *c.FirstDeliveryAt
}

// JobStatus is the status added for the job; archive.ErrNoCrawl for
// another.
func (a *Archive) JobStatus(ctx context.Context, crawlID string, topErrors int) (query.JobStatus, error) {
	unlock, err := a.begin(ctx, "JobStatus")
	if err != nil {
		return query.JobStatus{}, err
	}
	defer unlock()
	id, err := jobID("job", crawlID)
	if err != nil {
		return query.JobStatus{}, err
	}
	for _, j := range a.jobs {
		if j.CrawlID == id {
			j.TopErrors = j.TopErrors[:min(len(j.TopErrors), max(topErrors, 0))]
			return j, nil
		}
	}
	return query.JobStatus{}, fmt.Errorf("crawl %s: %w", id, archive.ErrNoCrawl)
}

// JobChanges counts the job's pages by their class against the version
// before them, as the archive's history classes them (q.URLPatterns are
// not matched; no URL is removed by absence); archive.ErrNoCrawl for a job
// never added.
func (a *Archive) JobChanges(ctx context.Context, crawlID string, q query.ChangeQuery) (query.JobChanges, error) {
	unlock, err := a.begin(ctx, "JobChanges")
	if err != nil {
		return query.JobChanges{}, err
	}
	defer unlock()
	id, err := jobID("job", crawlID)
	if err != nil {
		return query.JobChanges{}, err
	}
	i := slices.IndexFunc(a.jobs, func(j query.JobStatus) bool { return j.CrawlID == id })
	if i < 0 {
		return query.JobChanges{}, fmt.Errorf("crawl %s: %w", id, archive.ErrNoCrawl)
	}
	out := query.JobChanges{CrawlID: id.String(), Kind: a.jobs[i].Kind, Scope: a.scopes[id], Complete: events.EndsJob(a.jobs[i].LastEvent)}
	for _, p := range a.pages {
		if p.CrawlID != id {
			continue
		}
		switch a.change(p) {
		case events.ChangeNew:
			out.New++
		case events.ChangeSame:
			out.Same++
		case events.ChangeChanged:
			out.Changed++
			if len(out.ChangedURLs) < q.MaxURLs {
				out.ChangedURLs = append(out.ChangedURLs, p.URL)
			}
		case events.ChangeRemoved:
			out.Removed++
			if len(out.RemovedURLs) < q.MaxURLs {
				out.RemovedURLs = append(out.RemovedURLs, p.URL)
			}
		}
	}
	slices.Sort(out.ChangedURLs)
	slices.Sort(out.RemovedURLs)
	return out, nil
}

// JobsChangeCounts is JobChanges' counts of each of jobs that has any
// (Hold runs for it, then for each JobChanges).
func (a *Archive) JobsChangeCounts(ctx context.Context, jobs []uuid.UUID) (map[uuid.UUID]query.ChangeCounts, error) {
	if a.Hold != nil {
		if err := a.Hold(ctx, "JobsChangeCounts"); err != nil {
			return nil, err
		}
	}
	out := map[uuid.UUID]query.ChangeCounts{}
	for _, j := range jobs {
		c, err := a.JobChanges(ctx, j.String(), query.ChangeQuery{})
		if err != nil {
			return nil, err
		}
		if n := c.Counts(); n != (query.ChangeCounts{}) {
			out[j] = n
		}
	}
	return out, nil
}

// Failures lists the job's failures of q.Reason ("" every reason).
func (a *Archive) Failures(ctx context.Context, q query.FailuresQuery) (query.FailuresPage, error) {
	unlock, err := a.begin(ctx, "Failures")
	if err != nil {
		return query.FailuresPage{}, err
	}
	defer unlock()
	id, err := jobID("job", q.Job)
	if err != nil {
		return query.FailuresPage{}, err
	}
	var out query.FailuresPage
	for _, f := range a.failures[id] {
		if q.Reason == "" || f.Reason == q.Reason {
			out.Failures = append(out.Failures, f)
		}
	}
	return out, nil
}

// Blocked lists the job's blocked URLs.
func (a *Archive) Blocked(ctx context.Context, q query.BlockedQuery) (query.BlockedPage, error) {
	unlock, err := a.begin(ctx, "Blocked")
	if err != nil {
		return query.BlockedPage{}, err
	}
	defer unlock()
	id, err := jobID("job", q.Job)
	if err != nil {
		return query.BlockedPage{}, err
	}
	return query.BlockedPage{URLs: slices.Clone(a.blocked[id])}, nil
}

// Search finds the versions whose markdown or title holds q.Text (any
// case, as a substring: no tokens, no phrases), of q.Job, q.Host and
// q.Change when set, newest first; the snippet is the markdown around the
// first match. One page.
func (a *Archive) Search(ctx context.Context, q query.SearchQuery) (query.SearchPage, error) {
	unlock, err := a.begin(ctx, "Search")
	if err != nil {
		return query.SearchPage{}, err
	}
	defer unlock()
	text := strings.ToLower(q.Text)
	var out query.SearchPage
	for _, p := range a.newestFirst(func(query.ArchivedPage) bool { return true }) {
		i := strings.Index(strings.ToLower(p.Markdown), text)
		if i < 0 && !strings.Contains(strings.ToLower(p.Title), text) {
			continue
		}
		change := a.change(p)
		if (q.Job != "" && p.CrawlID.String() != q.Job) || (q.Change != "" && change != q.Change) || (q.Host != "" && host(p.URL) != q.Host) {
			continue
		}
		h := query.SearchHit{CrawlID: p.CrawlID, JobKind: p.JobKind, URL: p.URL, Host: host(p.URL), Title: p.Title, StatusCode: p.StatusCode,
			Success: p.Success, ReceivedAt: p.ReceivedAt, Change: change}
		if i >= 0 {
			h.Snippet = p.Markdown[max(i-80, 0):min(i+len(text)+160, len(p.Markdown))]
		}
		out.Hits = append(out.Hits, h)
	}
	if q.Count && q.Cursor == "" {
		// One page holds every hit: the count is exact.
		out.Count, out.CountExact = uint64(len(out.Hits)), true
	}
	return out, nil
}

func host(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	h, _, _ := strings.Cut(rest, "/")
	return h
}

// newestFirst are the pages that keep holds, newest first.
func (a *Archive) newestFirst(keep func(query.ArchivedPage) bool) []query.ArchivedPage {
	var out []query.ArchivedPage
	for _, p := range a.pages {
		if keep(p) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(x, y query.ArchivedPage) int { return y.ReceivedAt.Compare(x.ReceivedAt) })
	return out
}

// versions are the versions of url, oldest first: its pages that
// succeeded or say it is gone (404, 410), as the archive's history.
func (a *Archive) versions(url string) []query.ArchivedPage {
	vs := a.newestFirst(func(p query.ArchivedPage) bool {
		return p.URL == url && (p.Success || p.StatusCode == 404 || p.StatusCode == 410)
	})
	slices.Reverse(vs)
	return vs
}

// change is the class of p against the version before it.
func (a *Archive) change(p query.ArchivedPage) string {
	h := a.history(p.URL)
	for _, e := range h {
		if e.CrawlID == p.CrawlID {
			return e.Change
		}
	}
	return ""
}

func (a *Archive) history(url string) []query.HistoryEntry {
	vs := a.versions(url)
	out := make([]query.HistoryEntry, 0, len(vs))
	for i, v := range vs {
		e := query.HistoryEntry{CrawlID: v.CrawlID, JobKind: v.JobKind, Origin: v.Origin, StatusCode: v.StatusCode, ReceivedAt: v.ReceivedAt,
			JobStartedAt: v.ReceivedAt, Change: events.ChangeNew}
		if i > 0 {
			prev := vs[i-1].CrawlID
			e.PreviousCrawlID = &prev
			switch {
			case !v.Success:
				e.Change = events.ChangeRemoved
			case v.Markdown == vs[i-1].Markdown:
				e.Change = events.ChangeSame
			default:
				e.Change = events.ChangeChanged
			}
		}
		out = append(out, e)
	}
	return out
}

// Page is the newest version of url, or job's; query.ErrNoPage when no
// job holds url, query.ErrNoVersion when job does not.
func (a *Archive) Page(ctx context.Context, url, job string, parts query.PageParts) (query.ArchivedPage, error) {
	unlock, err := a.begin(ctx, "Page")
	if err != nil {
		return query.ArchivedPage{}, err
	}
	defer unlock()
	if url == "" {
		return query.ArchivedPage{}, &query.ParamError{Param: "url", Reason: "must be given"}
	}
	var id uuid.UUID
	if job != "" {
		if id, err = jobID("job", job); err != nil {
			return query.ArchivedPage{}, err
		}
	}
	all := a.newestFirst(func(p query.ArchivedPage) bool { return p.URL == url })
	if len(all) == 0 {
		return query.ArchivedPage{}, query.ErrNoPage
	}
	for _, p := range all {
		if job == "" || p.CrawlID == id {
			if !parts.Markdown {
				p.Markdown = ""
			}
			if !parts.HTML {
				p.HTML = ""
			}
			if !parts.Document {
				p.Document = nil
			}
			return p, nil
		}
	}
	return query.ArchivedPage{}, fmt.Errorf("job %s: %w", job, query.ErrNoVersion)
}

// History is every version of url, oldest first, with its change class;
// query.ErrNoPage when there is none.
func (a *Archive) History(ctx context.Context, url string) ([]query.HistoryEntry, error) {
	unlock, err := a.begin(ctx, "History")
	if err != nil {
		return nil, err
	}
	defer unlock()
	h := a.history(url)
	if len(h) == 0 {
		return nil, query.ErrNoPage
	}
	return h, nil
}

// Comparisons is each key's class and compared version, from the
// histories of their URLs; a key that is no version is not in it.
func (a *Archive) Comparisons(ctx context.Context, keys []query.VersionKey) (map[query.VersionKey]query.Comparison, error) {
	unlock, err := a.begin(ctx, "Comparisons")
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := map[query.VersionKey]query.Comparison{}
	for _, k := range keys {
		h := a.history(k.URL)
		for _, e := range h {
			if e.CrawlID != k.CrawlID {
				continue
			}
			c := query.Comparison{Change: e.Change, PreviousCrawlID: e.PreviousCrawlID}
			for _, p := range h {
				if e.PreviousCrawlID != nil && p.CrawlID == *e.PreviousCrawlID {
					c.PreviousReceivedAt = p.ReceivedAt
				}
			}
			out[k] = c
		}
	}
	return out, nil
}

// AddRemoval records that job removed url by absence, compared with
// previous's version of it (which AddPage adds).
func (a *Archive) AddRemoval(job uuid.UUID, url string, previous uuid.UUID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.removals == nil {
		a.removals = map[query.VersionKey]uuid.UUID{}
	}
	a.removals[query.VersionKey{CrawlID: job, URL: url}] = previous
}

// RemovedBy is the job AddRemoval named for job and url, or nil.
func (a *Archive) RemovedBy(ctx context.Context, url string, job uuid.UUID) (*uuid.UUID, error) {
	unlock, err := a.begin(ctx, "RemovedBy")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if prev, ok := a.removals[query.VersionKey{CrawlID: job, URL: url}]; ok {
		return &prev, nil
	}
	return nil, nil
}

// Versions picks two versions of url as the archive does: to is toJob's
// (else the newest of a job other than fromJob), from is fromJob's (else
// the newest before to). A malformed job id fails as the archive's does
// ("from job id: …"), before anything is read.
func (a *Archive) Versions(ctx context.Context, url, fromJob, toJob string) (from, to query.Version, err error) {
	unlock, err := a.begin(ctx, "Versions")
	if err != nil {
		return from, to, err
	}
	defer unlock()
	ids := map[string]uuid.UUID{}
	for which, job := range map[string]string{"from": fromJob, "to": toJob} {
		if job == "" {
			continue
		}
		if ids[which], err = uuid.Parse(job); err != nil {
			return from, to, fmt.Errorf("%s job id: %w", which, err)
		}
	}
	vs := a.newestFirst(func(p query.ArchivedPage) bool { return p.URL == url })
	if len(vs) == 0 {
		return from, to, query.ErrNoPage
	}
	pick := func(which, job string, ok func(query.ArchivedPage) bool) (query.Version, error) {
		for _, p := range vs {
			if (job == "" || p.CrawlID == ids[which]) && ok(p) {
				return query.Version{CrawlID: p.CrawlID, ReceivedAt: p.ReceivedAt, Success: p.Success, StatusCode: p.StatusCode, Markdown: p.Markdown}, nil
			}
		}
		if job != "" {
			return query.Version{}, fmt.Errorf("job %s: %w", job, query.ErrNoVersion)
		}
		return query.Version{}, query.ErrOneVersion
	}
	to, err = pick("to", toJob, func(p query.ArchivedPage) bool { return fromJob == "" || p.CrawlID != ids["from"] })
	if err != nil {
		return query.Version{}, query.Version{}, err
	}
	from, err = pick("from", fromJob, func(p query.ArchivedPage) bool {
		return p.CrawlID != to.CrawlID && (fromJob != "" || p.ReceivedAt.Before(to.ReceivedAt))
	})
	if err != nil {
		return query.Version{}, to, err
	}
	return from, to, nil
}

// Changes is every page added, in the order added, as one page of the feed
// whose Next is always set.
func (a *Archive) Changes(ctx context.Context, q query.FeedQuery) (query.ChangesPage, error) {
	unlock, err := a.begin(ctx, "Changes")
	if err != nil {
		return query.ChangesPage{}, err
	}
	defer unlock()
	out := query.ChangesPage{Next: "end"}
	if q.Cursor == out.Next {
		return out, nil
	}
	for _, p := range a.pages {
		out.Items = append(out.Items, query.FeedItem{ID: p.CrawlID.String() + " " + p.URL, Kind: query.FeedPage, CrawlID: p.CrawlID, JobKind: p.JobKind,
			URL: p.URL, StatusCode: p.StatusCode, Title: p.Title, Change: a.change(p), ReceivedAt: p.ReceivedAt, InsertedAt: p.ReceivedAt})
	}
	return out, nil
}

// ExportNDJSON writes the Document of each page of the job, one a line.
func (a *Archive) ExportNDJSON(ctx context.Context, job string, _ query.NDJSONOptions, w io.Writer) (int64, error) {
	return a.export(ctx, "ExportNDJSON", job, w, func(p query.ArchivedPage) []byte { return append(bytes.Clone(p.Document), '\n') })
}

// ExportParquet is query.ErrNoHTTP: the fake has no ClickHouse HTTP
// interface to write Parquet.
func (a *Archive) ExportParquet(ctx context.Context, job string, w io.Writer) (int64, error) {
	unlock, err := a.begin(ctx, "ExportParquet")
	if err != nil {
		return 0, err
	}
	unlock()
	return 0, query.ErrNoHTTP
}

// ExportWARC writes the html of each page of the job, one after the
// other: the bytes an export streams, not a WARC file (the format is the
// archive's, tested there).
func (a *Archive) ExportWARC(ctx context.Context, job string, _ query.WARCOptions, w io.Writer) (int64, error) {
	return a.export(ctx, "ExportWARC", job, w, func(p query.ArchivedPage) []byte { return []byte(p.HTML) })
}

// ExportCDXJ writes the URL of each page of the job, one a line: the bytes
// an export streams, not an index (tested in the archive).
func (a *Archive) ExportCDXJ(ctx context.Context, job string, _ query.WARCOptions, w io.Writer) (int64, error) {
	return a.export(ctx, "ExportCDXJ", job, w, func(p query.ArchivedPage) []byte { return []byte(p.URL + "\n") })
}

// ExportWACZ writes the html of each page of the job, as ExportWARC: the
// bytes an export streams, not a WACZ file (tested in the archive).
func (a *Archive) ExportWACZ(ctx context.Context, job string, w io.Writer) (int64, error) {
	return a.export(ctx, "ExportWACZ", job, w, func(p query.ArchivedPage) []byte { return []byte(p.HTML) })
}

func (a *Archive) export(ctx context.Context, method, job string, w io.Writer, record func(query.ArchivedPage) []byte) (int64, error) {
	unlock, err := a.begin(ctx, method)
	if err != nil {
		return 0, err
	}
	id, err := jobID("job", job)
	if err != nil {
		unlock()
		return 0, err
	}
	known := slices.ContainsFunc(a.jobs, func(j query.JobStatus) bool { return j.CrawlID == id })
	pages := a.newestFirst(func(p query.ArchivedPage) bool { return p.CrawlID == id })
	unlock()
	if !known && len(pages) == 0 {
		return 0, fmt.Errorf("crawl %s: %w", id, archive.ErrNoCrawl)
	}
	var n int64
	for _, p := range pages {
		m, err := w.Write(record(p))
		n += int64(m)
		if err != nil {
			return n, err
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
	}
	return n, nil
}
