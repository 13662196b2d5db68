package readercmd_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/trackingtest"
)

// TestChangeTracking: the reader, started as users start it over a real
// ClickHouse, answers the crawl API's changeTracking object on a page (with
// the git-diff mode), on its history and on its diff, each of the
// fixture's shape (testdata/changetracking) and computed from the archive:
// job B's version changed against job A's, with job A's time; and job B's
// change summary in GET /v1/jobs/{id}.
func TestChangeTracking(t *testing.T) {
	t.Parallel()
	s := seed(t)
	base := startReader(t, s.cfg, map[string]string{"CLICKHOUSE_HTTP_URL": clickhousetest.HTTPURL(t)})
	u := url.QueryEscape("https://r.example/0")
	const previous = "2026-11-20T10:00:00.000Z" // job A's version of the URL

	var p struct {
		ChangeTracking json.RawMessage `json:"changeTracking"`
	}
	getJSON(t, base+"/v1/pages?changeTracking=git-diff&url="+u, http.StatusOK, &p)
	trackingtest.CheckShape(t, p.ChangeTracking, "changed.json")
	var ct events.ChangeTracking
	_ = json.Unmarshal(p.ChangeTracking, &ct)
	const text = "===================================================================\n--- previous.md\t\n+++ current.md\t\n" +
		"@@ -1,3 +1,3 @@\n alpha page\n \n-line https://r.example/0\n\\ No newline at end of file\n+line changed\n\\ No newline at end of file\n"
	if ct.ChangeStatus != events.ChangeChanged || ct.Visibility != events.VisibilityVisible || ct.PreviousScrapeAt == nil ||
		*ct.PreviousScrapeAt != previous || ct.Diff == nil || ct.Diff.Text != text {
		t.Errorf("page's changeTracking: %s", p.ChangeTracking)
	}

	var h struct {
		Versions []struct {
			ChangeTracking json.RawMessage `json:"changeTracking"`
		} `json:"versions"`
	}
	getJSON(t, base+"/v1/pages/history?url="+u, http.StatusOK, &h)
	if len(h.Versions) != 2 {
		t.Fatalf("history of %d versions", len(h.Versions))
	}
	trackingtest.CheckShape(t, h.Versions[0].ChangeTracking, "new.json")

	var d struct {
		ChangeTracking json.RawMessage `json:"changeTracking"`
	}
	getJSON(t, base+"/v1/pages/diff?url="+u, http.StatusOK, &d)
	trackingtest.CheckShape(t, d.ChangeTracking, "changed.json")
	var dt events.ChangeTracking
	_ = json.Unmarshal(d.ChangeTracking, &dt)
	if dt.Diff == nil || dt.Diff.Text != text {
		t.Errorf("diff's changeTracking: %s", d.ChangeTracking)
	}

	var j struct {
		Changes struct {
			New, Changed, Same, Removed uint64
			ChangedURLs                 []string `json:"changedUrls"`
		} `json:"changes"`
	}
	getJSON(t, base+"/v1/jobs/"+s.jobB, http.StatusOK, &j)
	if c := j.Changes; c.Changed != 1 || c.New != 0 || len(c.ChangedURLs) != 1 || c.ChangedURLs[0] != "https://r.example/0" {
		t.Errorf("job B's changes: %+v", c)
	}
}

// TestSearchChangeTracking: GET /v1/search with changeTracking=git-diff
// gives every hit that is a version the crawl API's object, of the
// fixture's shape, computed over a real ClickHouse in one read of the
// page's comparisons: job B's version changed against job A's time with its
// diff, job A's versions new with a null previousScrapeAt, a failed fetch
// none; and a first page carries its count (exact for words, an upper
// bound for a phrase), a later one none.
func TestSearchChangeTracking(t *testing.T) {
	t.Parallel()
	s := seed(t)
	base := startReader(t, s.cfg, map[string]string{"CLICKHOUSE_HTTP_URL": clickhousetest.HTTPURL(t)})
	type hit struct {
		JobID          string          `json:"job_id"`
		URL            string          `json:"url"`
		Success        bool            `json:"success"`
		ChangeTracking json.RawMessage `json:"changeTracking"`
	}
	var a struct {
		Hits  []hit            `json:"hits"`
		Next  string           `json:"next_cursor"`
		Count *reader.HitCount `json:"count"`
	}
	getJSON(t, base+"/v1/search?q=alpha&changeTracking=git-diff", http.StatusOK, &a)
	if len(a.Hits) != 5 || a.Count == nil || *a.Count != (reader.HitCount{Value: 5, Relation: "eq"}) {
		t.Fatalf("%d hits, count %+v", len(a.Hits), a.Count)
	}
	const text = "===================================================================\n--- previous.md\t\n+++ current.md\t\n" +
		"@@ -1,3 +1,3 @@\n alpha page\n \n-line https://r.example/0\n\\ No newline at end of file\n+line changed\n\\ No newline at end of file\n"
	for _, h := range a.Hits {
		var ct events.ChangeTracking
		if err := json.Unmarshal(h.ChangeTracking, &ct); err != nil {
			t.Fatalf("%s of %s: %v (%s)", h.URL, h.JobID, err, h.ChangeTracking)
		}
		if h.JobID == s.jobB {
			trackingtest.CheckShape(t, h.ChangeTracking, "changed.json")
			if ct.ChangeStatus != events.ChangeChanged || ct.PreviousScrapeAt == nil || *ct.PreviousScrapeAt != "2026-11-20T10:00:00.000Z" ||
				ct.Diff == nil || ct.Diff.Text != text || ct.Visibility != events.VisibilityVisible {
				t.Errorf("job B's hit: %s", h.ChangeTracking)
			}
			continue
		}
		trackingtest.CheckShape(t, h.ChangeTracking, "new.json")
		if ct.ChangeStatus != events.ChangeNew || ct.PreviousScrapeAt != nil {
			t.Errorf("%s of job A: %s", h.URL, h.ChangeTracking)
		}
	}

	var all struct {
		Hits  []hit            `json:"hits"`
		Count *reader.HitCount `json:"count"`
	}
	getJSON(t, base+"/v1/search?job="+s.jobA+"&changeTracking=true", http.StatusOK, &all)
	failed := 0
	for _, h := range all.Hits {
		if h.Success {
			trackingtest.CheckShape(t, h.ChangeTracking, "new.json")
			continue
		}
		if failed++; h.ChangeTracking != nil {
			t.Errorf("failed fetch %s has an object: %s", h.URL, h.ChangeTracking)
		}
	}
	if failed == 0 {
		t.Error("no failed fetch among job A's hits")
	}

	a.Hits = nil
	getJSON(t, base+"/v1/search?q=%22page+line%22", http.StatusOK, &a)
	if a.Count == nil || a.Count.Relation != "lte" || a.Count.Value < uint64(len(a.Hits)) || a.Hits[0].ChangeTracking != nil {
		t.Errorf("phrase: count %+v, hits %+v", a.Count, a.Hits)
	}
	getJSON(t, base+"/v1/search?q=alpha&limit=2", http.StatusOK, &a)
	if a.Next == "" {
		t.Fatal("no second page")
	}
	a.Count = nil
	getJSON(t, base+"/v1/search?q=alpha&limit=2&cursor="+url.QueryEscape(a.Next), http.StatusOK, &a)
	if a.Count != nil {
		t.Errorf("a later page counts: %+v", a.Count)
	}
}

// TestFeedChangeTracking: GET /v1/changes with changeTracking=git-diff
// gives every page of the feed that is a version the crawl API's object,
// as search hits have it: job B's version changed against job A's time
// with its diff, job A's versions new, failures and failed fetches none;
// without the parameter no entry has one.
func TestFeedChangeTracking(t *testing.T) {
	t.Parallel()
	s := seed(t)
	base := startReader(t, s.cfg, map[string]string{"CLICKHOUSE_HTTP_URL": clickhousetest.HTTPURL(t)})
	type entry struct {
		Kind           string          `json:"kind"`
		JobID          string          `json:"job_id"`
		URL            string          `json:"url"`
		Change         string          `json:"change"`
		ChangeTracking json.RawMessage `json:"changeTracking"`
	}
	var feed struct {
		Changes []entry `json:"changes"`
	}
	getJSON(t, base+"/v1/changes?limit=1000&changeTracking=git-diff", http.StatusOK, &feed)
	changed, tracked := 0, 0
	for _, e := range feed.Changes {
		if e.ChangeTracking == nil {
			if e.Kind == "page" && e.Change != "" {
				t.Errorf("%s of %s (%s) has no object", e.URL, e.JobID, e.Change)
			}
			continue
		}
		tracked++
		ct := decodeTracking(t, e.ChangeTracking)
		if ct.ChangeStatus != e.Change || e.Kind != "page" {
			t.Errorf("%s %s of %s: class %q, object %s", e.Kind, e.URL, e.JobID, e.Change, e.ChangeTracking)
		}
		if e.JobID == s.jobB && e.URL == "https://r.example/0" {
			changed++
			trackingtest.CheckShape(t, e.ChangeTracking, "changed.json")
			if ct.PreviousScrapeAt == nil || *ct.PreviousScrapeAt != "2026-11-20T10:00:00.000Z" || ct.Diff == nil || !strings.Contains(ct.Diff.Text, "+line changed") {
				t.Errorf("job B's changed version: %s", e.ChangeTracking)
			}
		}
	}
	if changed != 1 || tracked < 2 {
		t.Errorf("%d entries with an object, %d of them job B's changed version; want job B's once among them", tracked, changed)
	}
	feed.Changes = nil
	getJSON(t, base+"/v1/changes?limit=1000", http.StatusOK, &feed)
	for _, e := range feed.Changes {
		if e.ChangeTracking != nil {
			t.Errorf("without the parameter, %s carries %s", e.URL, e.ChangeTracking)
		}
	}
}

// TestHiddenRemoval: a URL a complete recrawl of its scope no longer found
// (removed by absence) is, wherever its latest state is answered for that
// recrawl, the crawl API's object for a URL the crawl did not find through
// its links: removed, hidden, previousScrapeAt the compared version's time.
// GET /v1/pages?job=… with changeTracking answers that version; the NDJSON
// export with changeTracking=true carries the object on every line of the
// job (each of its class, visible) and then a line for the dropped URL;
// with git-diff the changed line has its diff.
// Without the parameter both answer as before; a URL the job neither holds
// nor removed stays 404.
func TestHiddenRemoval(t *testing.T) {
	t.Parallel()
	cfg, first, second := recrawl(t)
	base := startReader(t, cfg, nil)
	at := func(d time.Duration) *string { return events.TrackingTime(recrawlStart.Add(d)) }
	dropped := url.QueryEscape("https://j.example/dropped")

	var p struct {
		JobID          string          `json:"job_id"`
		Markdown       string          `json:"markdown"`
		ChangeTracking json.RawMessage `json:"changeTracking"`
	}
	getJSON(t, base+"/v1/pages?changeTracking=true&job="+second+"&url="+dropped, http.StatusOK, &p)
	trackingtest.CheckShape(t, p.ChangeTracking, "removed-hidden.json")
	want := events.ChangeTracking{PreviousScrapeAt: at(3 * time.Second), ChangeStatus: events.ChangeRemoved, Visibility: events.VisibilityHidden}
	if got := decodeTracking(t, p.ChangeTracking); p.JobID != first || p.Markdown != "text of dropped" || !sameTracking(got, want) {
		t.Errorf("dropped URL's page: job %s, markdown %q, %s", p.JobID, p.Markdown, p.ChangeTracking)
	}
	for _, path := range []string{"/v1/pages?job=" + second + "&url=" + dropped, "/v1/pages?changeTracking=true&job=" + first + "&url=" + url.QueryEscape("https://j.example/added")} {
		if resp, body := get(t, base+path, testToken); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}

	resp, body := get(t, base+"/v1/jobs/"+second+"/export?format=ndjson&changeTracking=true", testToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export: %d %s", resp.StatusCode, body)
	}
	wants := []struct {
		url string
		ct  events.ChangeTracking
	}{
		{"https://j.example/added", events.ChangeTracking{ChangeStatus: events.ChangeNew, Visibility: events.VisibilityVisible}},
		{"https://j.example/edited", events.ChangeTracking{PreviousScrapeAt: at(time.Second), ChangeStatus: events.ChangeChanged, Visibility: events.VisibilityVisible}},
		{"https://j.example/gone", events.ChangeTracking{PreviousScrapeAt: at(2 * time.Second), ChangeStatus: events.ChangeRemoved, Visibility: events.VisibilityVisible}},
		{"https://j.example/same", events.ChangeTracking{PreviousScrapeAt: at(0), ChangeStatus: events.ChangeSame, Visibility: events.VisibilityVisible}},
		{"https://j.example/dropped", want},
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != len(wants) {
		t.Fatalf("export: %d lines, want %d:\n%s", len(lines), len(wants), body)
	}
	for i, w := range wants {
		var doc struct {
			Metadata       struct{ URL string }
			ChangeTracking json.RawMessage `json:"changeTracking"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &doc); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, lines[i])
		}
		if got := decodeTracking(t, doc.ChangeTracking); doc.Metadata.URL != w.url || !sameTracking(got, w.ct) {
			t.Errorf("line %d: %s, want %s %+v", i, lines[i], w.url, w.ct)
		}
	}

	_, plain := get(t, base+"/v1/jobs/"+second+"/export?format=ndjson", testToken)
	if strings.Contains(string(plain), "changeTracking") || strings.Count(string(plain), "\n") != 4 {
		t.Errorf("export without the parameter:\n%s", plain)
	}
	// git-diff: the edited page's line has its diff, read beside the
	// stream; no other line has one.
	_, diffed := get(t, base+"/v1/jobs/"+second+"/export?format=ndjson&changeTracking=git-diff", testToken)
	wantDiff, err := events.NewTrackingDiff("text of edited", "text edited")
	if err != nil || wantDiff == nil {
		t.Fatal(err)
	}
	diffs := 0
	for _, line := range strings.Split(strings.TrimSuffix(string(diffed), "\n"), "\n") {
		var doc struct {
			Metadata       struct{ URL string }
			ChangeTracking events.ChangeTracking `json:"changeTracking"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("git-diff export: %v: %s", err, line)
		}
		if d := doc.ChangeTracking.Diff; d != nil {
			diffs++
			if doc.Metadata.URL != "https://j.example/edited" || d.Text != wantDiff.Text {
				t.Errorf("git-diff export: %s has diff %q, want the edited page's %q", doc.Metadata.URL, d.Text, wantDiff.Text)
			}
		}
	}
	if diffs != 1 {
		t.Errorf("git-diff export: %d diffs, want 1:\n%s", diffs, diffed)
	}

	for _, q := range []string{"format=parquet&changeTracking=true", "format=warc&changeTracking=git-diff", "changeTracking=json"} {
		var e reader.ErrorBody
		getJSON(t, base+"/v1/jobs/"+second+"/export?"+q, http.StatusBadRequest, &e)
		if e.Parameter != "changeTracking" {
			t.Errorf("%s: %+v", q, e)
		}
	}
}

func decodeTracking(t *testing.T, b json.RawMessage) events.ChangeTracking {
	t.Helper()
	var ct events.ChangeTracking
	if err := json.Unmarshal(b, &ct); err != nil {
		t.Errorf("changeTracking %s: %v", b, err)
	}
	return ct
}

// sameTracking compares the fields the archive computes.
func sameTracking(a, b events.ChangeTracking) bool {
	return a.ChangeStatus == b.ChangeStatus && a.Visibility == b.Visibility &&
		(a.PreviousScrapeAt == nil) == (b.PreviousScrapeAt == nil) && (a.PreviousScrapeAt == nil || *a.PreviousScrapeAt == *b.PreviousScrapeAt)
}
