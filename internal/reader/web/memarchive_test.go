package web_test

import (
	"context"
	"sort"
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"github.com/crawlhouse/crawlhouse/internal/textdiff"
)

// memArchive is an in-memory web.Archive over a few pages, for the tests of
// the pages themselves (rendering, escaping, parameters, status codes). The
// archive's own queries are tested in internal/archive, and the pages over
// the real archive in the browser test.
type memArchive struct {
	jobs     []web.Job
	pages    []web.Page               // one per (URL, job)
	failures map[string][]web.Failure // by job
	blocked  map[string][]string      // by job
	// err, when set, is what every method returns.
	err error
}

var _ web.Archive = (*memArchive)(nil)

func (m *memArchive) Jobs(_ context.Context, q web.JobsQuery) (web.JobList, error) {
	if m.err != nil {
		return web.JobList{}, m.err
	}
	var out web.JobList
	for _, j := range m.jobs {
		if q.Kind == "" || j.Kind == q.Kind {
			out.Jobs = append(out.Jobs, j)
		}
	}
	return out, nil
}

func (m *memArchive) Job(_ context.Context, id string) (web.Job, error) {
	if m.err != nil {
		return web.Job{}, m.err
	}
	for _, j := range m.jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return web.Job{}, web.ErrNotFound
}

func (m *memArchive) Failures(_ context.Context, q web.FailuresQuery) (web.FailureList, error) {
	if m.err != nil {
		return web.FailureList{}, m.err
	}
	var out web.FailureList
	for _, f := range m.failures[q.Job] {
		if q.Reason == "" || f.Reason == q.Reason {
			out.Failures = append(out.Failures, f)
		}
	}
	return out, nil
}

func (m *memArchive) Blocked(_ context.Context, q web.BlockedQuery) (web.BlockedList, error) {
	if m.err != nil {
		return web.BlockedList{}, m.err
	}
	return web.BlockedList{URLs: m.blocked[q.Job]}, nil
}

// Search matches pages whose markdown or title contains q.Text; the
// snippet is the text around the match.
func (m *memArchive) Search(_ context.Context, q web.SearchQuery) (web.SearchResults, error) {
	if m.err != nil {
		return web.SearchResults{}, m.err
	}
	var out web.SearchResults
	for _, p := range m.pages {
		if q.Job != "" && p.JobID != q.Job {
			continue
		}
		i := strings.Index(p.Markdown, q.Text)
		if i < 0 && !strings.Contains(p.Title, q.Text) {
			continue
		}
		h := web.Hit{URL: p.URL, JobID: p.JobID, Title: p.Title, StatusCode: p.StatusCode, ReceivedAt: p.ReceivedAt}
		if i >= 0 {
			h.Snippet = p.Markdown[max(i-60, 0):min(i+len(q.Text)+60, len(p.Markdown))]
		}
		out.Hits = append(out.Hits, h)
	}
	return out, nil
}

func (m *memArchive) versions(url string) []web.Page {
	var vs []web.Page
	for _, p := range m.pages {
		if p.URL == url {
			vs = append(vs, p)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].ReceivedAt.After(vs[j].ReceivedAt) })
	return vs
}

func (m *memArchive) Page(_ context.Context, url, job string) (web.Page, error) {
	if m.err != nil {
		return web.Page{}, m.err
	}
	vs := m.versions(url)
	for _, p := range vs {
		if job == "" || p.JobID == job {
			for i, v := range vs {
				ver := web.Version{JobID: v.JobID, ReceivedAt: v.ReceivedAt, StatusCode: v.StatusCode, Success: v.Success, Change: web.ChangeNew}
				if i+1 < len(vs) {
					ver.PreviousJobID = vs[i+1].JobID
					ver.Change = web.ChangeChanged
					if vs[i+1].Markdown == v.Markdown {
						ver.Change = web.ChangeSame
					}
				}
				p.Versions = append(p.Versions, ver)
			}
			return p, nil
		}
	}
	return web.Page{}, web.ErrNotFound
}

func (m *memArchive) Diff(ctx context.Context, url, fromJob, toJob string) (web.Diff, error) {
	to, err := m.Page(ctx, url, toJob)
	if err != nil {
		return web.Diff{}, err
	}
	if fromJob == "" {
		if len(to.Versions) < 2 {
			return web.Diff{}, web.ErrNotFound
		}
		fromJob = to.Versions[1].JobID
	}
	from, err := m.Page(ctx, url, fromJob)
	if err != nil {
		return web.Diff{}, err
	}
	r := textdiff.Diff(from.Markdown, to.Markdown)
	d := web.Diff{URL: url, Coarse: r.Coarse,
		From: web.Version{JobID: from.JobID, ReceivedAt: from.ReceivedAt},
		To:   web.Version{JobID: to.JobID, ReceivedAt: to.ReceivedAt, Change: web.ChangeChanged}}
	for _, e := range r.Edits {
		d.Lines = append(d.Lines, web.DiffLine{Op: byte(e.Op), Text: e.Line})
	}
	return d, nil
}
