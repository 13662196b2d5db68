package readercmd_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/events"
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
