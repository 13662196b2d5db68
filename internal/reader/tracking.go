package reader

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/textdiff"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// The answers carry the crawl API's own changeTracking object
// (events.ChangeTracking, testdata/changetracking), computed from the
// archive, so that code written against the crawl API reads it unchanged
// (docs/read-api.md, "changeTracking").

// historyTracking is the object of h[i], a version whose class the archive
// computed (page_changes): previousScrapeAt is the compared version's time
// when the history holds it (all but the oldest of a history cut at 1000),
// visibility is visible (a version is a page the job found; a removal by
// absence is no version). No diff: GET /v1/pages/diff has it.
func historyTracking(h []query.HistoryEntry, i int) *events.ChangeTracking {
	ct := &events.ChangeTracking{ChangeStatus: h[i].Change, Visibility: events.VisibilityVisible}
	if prev := h[i].PreviousCrawlID; prev != nil {
		for _, e := range h[:i] {
			if e.CrawlID == *prev {
				ct.PreviousScrapeAt = events.TrackingTime(e.ReceivedAt)
			}
		}
	}
	return ct
}

// pairTracking is the object of to against from, the two versions of a
// diff, with the git-diff mode's diff when the text changed: removed when
// to answered 404 or 410, changed when its text differs (or it is back
// from a 404 or 410), same otherwise.
func pairTracking(from, to query.Version, d textdiff.Result) *events.ChangeTracking {
	ct := &events.ChangeTracking{PreviousScrapeAt: events.TrackingTime(from.ReceivedAt), Visibility: events.VisibilityVisible}
	switch {
	case gone(to.StatusCode):
		ct.ChangeStatus = events.ChangeRemoved
	case d.Changed() || gone(from.StatusCode):
		ct.ChangeStatus = events.ChangeChanged
	default:
		ct.ChangeStatus = events.ChangeSame
	}
	if ct.ChangeStatus == events.ChangeChanged {
		diff, err := events.NewTrackingDiff(from.Markdown, to.Markdown)
		if err != nil {
			ct.DiffOmitted = err.Error()
		}
		ct.Diff = diff
	}
	return ct
}

// gone reports a status that removes a page (events.ChangeRemoved).
func gone(status uint16) bool { return status == 404 || status == 410 }

// trackingModes reads the changeTracking parameter of GET /v1/pages,
// GET /v1/search, GET /v1/changes and the NDJSON export: absent, no object; "true", the object; "git-diff" (the
// crawl API's mode), the object with its diff. The crawl API's "json" mode needs an extraction
// the archive has not, and is refused rather than ignored.
func trackingModes(c echo.Context) (asked, gitDiff bool, err error) {
	if !c.QueryParams().Has("changeTracking") {
		return false, false, nil
	}
	for _, m := range strings.Split(c.QueryParam("changeTracking"), ",") {
		switch strings.TrimSpace(m) {
		case "true", "":
		case events.ModeGitDiff:
			gitDiff = true
		case events.ModeJSON:
			return false, false, &query.ParamError{Param: "changeTracking", Reason: "the json mode is the crawl API's extraction with a schema and a model, which the archive has not; git-diff is served"}
		default:
			return false, false, &query.ParamError{Param: "changeTracking", Reason: "must be true or git-diff"}
		}
	}
	return true, gitDiff, nil
}

// pageTracking is the object of url's version in job, read from its
// history (the class and the compared version) and, with gitDiff and a
// changed version, the diff against the compared version. nil for a
// version that is no version of the history (a failed fetch other than
// 404 or 410 says nothing of the page: docs/search.md).
func (s *Server) pageTracking(ctx context.Context, url string, job uuid.UUID, gitDiff bool) (*events.ChangeTracking, error) {
	h, err := s.archive.History(ctx, url)
	if err != nil {
		return nil, err
	}
	for i, e := range h {
		if e.CrawlID != job {
			continue
		}
		ct := historyTracking(h, i)
		if gitDiff {
			err = s.addDiff(ctx, ct, url, e.PreviousCrawlID, job)
		}
		return ct, err
	}
	return nil, nil
}

// addDiff sets ct's diff, for a changed version, against the compared
// version of job prev: two versions read.
func (s *Server) addDiff(ctx context.Context, ct *events.ChangeTracking, url string, prev *uuid.UUID, job uuid.UUID) error {
	if ct.ChangeStatus != events.ChangeChanged || prev == nil {
		return nil
	}
	from, to, err := s.archive.Versions(ctx, url, prev.String(), job.String())
	if err != nil {
		return err
	}
	diff, err := events.NewTrackingDiff(from.Markdown, to.Markdown)
	if err != nil {
		ct.DiffOmitted = err.Error()
	}
	ct.Diff = diff
	return nil
}

// MaxHitDiffs is the most diffs one page of search hits carries with
// changeTracking=git-diff: each reads two versions, one changed hit after
// the other (two markdowns held at a time). A changed hit past it says so
// in diffOmitted; its page (GET /v1/pages) has the diff.
const MaxHitDiffs = 20

// versionsTracking is the object of each version keys names (nil for a
// failed fetch other than 404 or 410, which is no version), from one read
// of their comparisons, and with gitDiff the diffs of the first
// MaxHitDiffs changed ones. Each is a page its job fetched: visible. Search
// hits and the changes feed are answered with it.
func (s *Server) versionsTracking(ctx context.Context, keys []query.VersionKey, gitDiff bool) ([]*events.ChangeTracking, error) {
	cmp, err := s.archive.Comparisons(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]*events.ChangeTracking, len(keys))
	diffs := 0
	for i, k := range keys {
		c, ok := cmp[k]
		if !ok {
			continue
		}
		ct := &events.ChangeTracking{ChangeStatus: c.Change, Visibility: events.VisibilityVisible}
		if !c.PreviousReceivedAt.IsZero() {
			ct.PreviousScrapeAt = events.TrackingTime(c.PreviousReceivedAt)
		}
		out[i] = ct
		if !gitDiff || ct.ChangeStatus != events.ChangeChanged {
			continue
		}
		if diffs++; diffs > MaxHitDiffs {
			ct.DiffOmitted = fmt.Sprintf("more than %d changed versions in one answer: GET /v1/pages?changeTracking=git-diff has this one's diff", MaxHitDiffs)
			continue
		}
		if err := s.addDiff(ctx, ct, k.URL, c.PreviousCrawlID, k.CrawlID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// hitsTracking sets the object of each hit that is a version
// (versionsTracking).
func (s *Server) hitsTracking(ctx context.Context, hits []Hit, gitDiff bool) error {
	keys := make([]query.VersionKey, 0, len(hits))
	for _, h := range hits {
		id, err := uuid.Parse(h.JobID)
		if err != nil {
			return err
		}
		keys = append(keys, query.VersionKey{CrawlID: id, URL: h.URL})
	}
	cts, err := s.versionsTracking(ctx, keys, gitDiff)
	for i := range cts {
		hits[i].ChangeTracking = cts[i]
	}
	return err
}

// feedTracking sets the object of each page of the changes feed that is a
// version (versionsTracking); a failure has none.
func (s *Server) feedTracking(ctx context.Context, items []query.FeedItem, out []Change, gitDiff bool) error {
	var keys []query.VersionKey
	var at []int
	for i, it := range items {
		if it.Kind == query.FeedPage {
			keys = append(keys, query.VersionKey{CrawlID: it.CrawlID, URL: it.URL})
			at = append(at, i)
		}
	}
	cts, err := s.versionsTracking(ctx, keys, gitDiff)
	for j := range cts {
		out[at[j]].ChangeTracking = cts[j]
	}
	return err
}

// exportTracking reads the changeTracking parameter of an NDJSON export:
// true, each line with the object; git-diff, a changed one's with its
// diff too (query.NDJSONOptions).
func exportTracking(c echo.Context) (query.NDJSONOptions, error) {
	asked, gitDiff, err := trackingModes(c)
	return query.NDJSONOptions{ChangeTracking: asked, GitDiff: gitDiff}, err
}

// latestState answers GET /v1/pages?job=… for a URL that job does not
// hold (noVersion, query.ErrNoVersion) but removed by absence: the URL's
// latest state, the version job compared it with, and the object the
// crawl API gives a URL its crawl did not find through its links
// (removed, hidden). Any other URL keeps noVersion.
func (s *Server) latestState(ctx context.Context, url, job string, parts query.PageParts, noVersion error) (query.ArchivedPage, *events.ChangeTracking, error) {
	id, err := uuid.Parse(job)
	if err != nil {
		return query.ArchivedPage{}, nil, noVersion
	}
	prev, err := s.archive.RemovedBy(ctx, url, id)
	if err != nil || prev == nil {
		return query.ArchivedPage{}, nil, cmp.Or(err, noVersion)
	}
	p, err := s.archive.Page(ctx, url, prev.String(), parts)
	if err != nil {
		return query.ArchivedPage{}, nil, err
	}
	return p, &events.ChangeTracking{PreviousScrapeAt: events.TrackingTime(p.ReceivedAt), ChangeStatus: events.ChangeRemoved, Visibility: events.VisibilityHidden}, nil
}
