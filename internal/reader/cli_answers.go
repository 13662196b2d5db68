package reader

import (
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/textdiff"
)

// NewJobAnswer is the body of GET /v1/jobs/{id} for st; `sink status
// --json` prints the same.
func NewJobAnswer(st query.JobStatus) JobAnswer {
	out := JobAnswer{Job: jobOf(st.Crawl), SuccessfulPages: st.SuccessfulPages, TopErrors: make([]ErrorCount, 0, len(st.TopErrors))}
	for _, e := range st.TopErrors {
		out.TopErrors = append(out.TopErrors, ErrorCount{Error: e.Error, Pages: e.Pages})
	}
	return out
}

// NewDiffAnswer is the body of GET /v1/pages/diff for two versions of url;
// `sink diff --json` prints the same.
func NewDiffAnswer(url string, from, to query.Version) DiffAnswer {
	d := textdiff.Diff(from.Markdown, to.Markdown)
	out := DiffAnswer{URL: url, Changed: d.Changed(),
		From: DiffSide{JobID: from.CrawlID.String(), ReceivedAt: from.ReceivedAt, StatusCode: from.StatusCode},
		To:   DiffSide{JobID: to.CrawlID.String(), ReceivedAt: to.ReceivedAt, StatusCode: to.StatusCode}}
	if out.Changed {
		out.Unified = d.Unified("a/"+from.CrawlID.String(), "b/"+to.CrawlID.String())
	}
	out.ChangeTracking = pairTracking(from, to, d)
	return out
}
