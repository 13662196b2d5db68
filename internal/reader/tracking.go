package reader

import (
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/textdiff"
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
