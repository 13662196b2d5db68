package reader_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/trackingtest"
	"github.com/google/uuid"
)

// TestChangeTrackingAnswers: the history's versions and the diff carry the
// crawl API's changeTracking object, field by field of the fixture's shape
// (testdata/changetracking): the first version new with a null
// previousScrapeAt, the second changed against the first's time, and the
// diff's with its git-diff text as the crawl API writes it.
func TestChangeTrackingAnswers(t *testing.T) {
	t.Parallel()
	a, _, _ := twoJobs()
	srv := startReader(t, config(), a)
	u := "https%3A%2F%2Fr.example%2F0"
	var h struct {
		Versions []struct {
			ChangeTracking json.RawMessage `json:"changeTracking"`
		} `json:"versions"`
	}
	getJSON(t, get(t, srv, "/v1/pages/history?url="+u), "history", 200, &h)
	if len(h.Versions) != 2 {
		t.Fatalf("history: %d versions", len(h.Versions))
	}
	trackingtest.CheckShape(t, h.Versions[0].ChangeTracking, "new.json")
	trackingtest.CheckShape(t, h.Versions[1].ChangeTracking, "removed-hidden.json") // no diff: the history's shape
	var second events.ChangeTracking
	_ = json.Unmarshal(h.Versions[1].ChangeTracking, &second)
	if second.ChangeStatus != events.ChangeChanged || second.Visibility != events.VisibilityVisible ||
		second.PreviousScrapeAt == nil || *second.PreviousScrapeAt != "2026-11-20T10:00:00.000Z" {
		t.Errorf("history's second version: %s", h.Versions[1].ChangeTracking)
	}

	var d struct {
		ChangeTracking json.RawMessage `json:"changeTracking"`
	}
	getJSON(t, get(t, srv, "/v1/pages/diff?url="+u), "diff", 200, &d)
	trackingtest.CheckShape(t, d.ChangeTracking, "changed.json")
	var ct events.ChangeTracking
	_ = json.Unmarshal(d.ChangeTracking, &ct)
	const want = "===================================================================\n--- previous.md\t\n+++ current.md\t\n" +
		"@@ -1,2 +1,2 @@\n kettle\n-old line\n\\ No newline at end of file\n+new line\n\\ No newline at end of file\n"
	if ct.ChangeStatus != events.ChangeChanged || ct.Diff == nil || ct.Diff.Text != want || *ct.PreviousScrapeAt != "2026-11-20T10:00:00.000Z" {
		t.Errorf("diff's changeTracking: %s", d.ChangeTracking)
	}
}

// TestPageChangeTracking: GET /v1/pages adds the object when asked for,
// with the git-diff mode's diff against the compared version; the crawl
// API's json mode and an unknown mode are refused naming the parameter,
// and without the parameter the answer is as before.
func TestPageChangeTracking(t *testing.T) {
	t.Parallel()
	a, jobA, _ := twoJobs()
	srv := startReader(t, config(), a)
	u := "https%3A%2F%2Fr.example%2F0"
	var p struct {
		ChangeTracking json.RawMessage `json:"changeTracking"`
	}
	getJSON(t, get(t, srv, "/v1/pages?changeTracking=git-diff&url="+u), "page", 200, &p)
	trackingtest.CheckShape(t, p.ChangeTracking, "changed.json")
	var ct events.ChangeTracking
	_ = json.Unmarshal(p.ChangeTracking, &ct)
	if ct.ChangeStatus != events.ChangeChanged || ct.Diff == nil || ct.Diff.JSON.Files[0].Chunks[0].Content != "@@ -1,2 +1,2 @@" {
		t.Errorf("newest version's changeTracking: %s", p.ChangeTracking)
	}

	p.ChangeTracking = nil
	getJSON(t, get(t, srv, "/v1/pages?changeTracking=true&url="+u+"&job="+jobA.String()), "page", 200, &p)
	trackingtest.CheckShape(t, p.ChangeTracking, "new.json")

	p.ChangeTracking = nil
	getJSON(t, get(t, srv, "/v1/pages?url="+u), "page", 200, &p)
	if p.ChangeTracking != nil {
		t.Errorf("not asked, changeTracking: %s", p.ChangeTracking)
	}
	for _, q := range []string{"changeTracking=json", "changeTracking=diff", "changeTracking=true&format=markdown"} {
		var e struct{ Error, Message string }
		getJSON(t, get(t, srv, "/v1/pages?"+q+"&url="+u), q, 400, &e)
		if !strings.Contains(e.Message, "changeTracking") {
			t.Errorf("%s: %+v", q, e)
		}
	}
}

// TestJobChanges: GET /v1/jobs/{id} carries the job's change summary as
// crawl.changes publishes it: counts and the changed URLs.
func TestJobChanges(t *testing.T) {
	t.Parallel()
	a, jobA, jobB := twoJobs()
	srv := startReader(t, config(), a)
	for _, tc := range []struct {
		job                   string
		new, changed, removed int
		changedURLs           []string
	}{
		{jobA.String(), 1, 0, 0, []string{}},
		{jobB.String(), 0, 1, 0, []string{"https://r.example/0"}},
	} {
		var j struct {
			Changes *struct {
				CrawlID                     string `json:"crawlId"`
				New, Changed, Same, Removed int
				ChangedURLs                 []string `json:"changedUrls"`
				RemovedURLs                 []string `json:"removedUrls"`
				Text                        string
			} `json:"changes"`
		}
		getJSON(t, get(t, srv, "/v1/jobs/"+tc.job), tc.job, 200, &j)
		c := j.Changes
		if c == nil || c.CrawlID != tc.job || c.New != tc.new || c.Changed != tc.changed || c.Removed != tc.removed ||
			strings.Join(c.ChangedURLs, " ") != strings.Join(tc.changedURLs, " ") || c.ChangedURLs == nil || c.RemovedURLs == nil || c.Text == "" {
			t.Errorf("job %s changes: %+v", tc.job, c)
		}
	}
}

// TestSearchDiffsBounded: a page of search hits with changeTracking=git-diff
// reads the diffs of at most MaxHitDiffs changed hits (two versions each,
// one hit after the other); the later changed hits keep their object and
// say in diffOmitted where their diff is, and the comparisons of the whole
// page are one read.
func TestSearchDiffsBounded(t *testing.T) {
	t.Parallel()
	a := &archivetest.Archive{}
	jobA, jobB := uuid.New(), uuid.New()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	const pages = reader.MaxHitDiffs + 5
	for i := range pages {
		u := fmt.Sprintf("https://r.example/%02d", i)
		for j, job := range []uuid.UUID{jobA, jobB} {
			a.AddPage(query.ArchivedPage{CrawlID: job, JobKind: "crawl", URL: u, StatusCode: 200, Success: true, Origin: "webhook",
				ReceivedAt: t0.Add(time.Duration(j) * time.Hour), Markdown: fmt.Sprintf("page %d\nversion %d", i, j)})
		}
	}
	var mu sync.Mutex
	calls := map[string]int{}
	a.Hold = func(_ context.Context, method string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[method]++
		return nil
	}
	srv := startReader(t, config(), a)
	var got struct {
		Hits []struct {
			ChangeTracking *events.ChangeTracking `json:"changeTracking"`
		} `json:"hits"`
	}
	path := fmt.Sprintf("/v1/search?job=%s&limit=%d&changeTracking=git-diff", jobB, pages)
	getJSON(t, get(t, srv, path), path, 200, &got)
	if len(got.Hits) != pages {
		t.Fatalf("%d hits", len(got.Hits))
	}
	diffs, omitted := 0, 0
	for _, h := range got.Hits {
		switch ct := h.ChangeTracking; {
		case ct == nil || ct.ChangeStatus != events.ChangeChanged:
			t.Fatalf("hit's object: %+v", ct)
		case ct.Diff != nil:
			diffs++
		case strings.Contains(ct.DiffOmitted, "GET /v1/pages?changeTracking=git-diff"):
			omitted++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if diffs != reader.MaxHitDiffs || omitted != pages-reader.MaxHitDiffs || calls["Versions"] != reader.MaxHitDiffs || calls["Comparisons"] != 1 {
		t.Errorf("%d diffs, %d omitted, calls %v", diffs, omitted, calls)
	}
}
