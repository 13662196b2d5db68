package readercmd_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// recrawlStart is when recrawl's first crawl delivers its first page
// (https://j.example/same, then edited, gone and dropped a second apart).
var recrawlStart = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

// recrawl archives a crawl of a scope, then a complete recrawl of it a day
// later with a page unchanged (same), one edited, one gone (404), one no
// longer found (dropped: removed by absence) and one new (added).
func recrawl(t *testing.T) (cfg archive.Config, first, second string) {
	t.Helper()
	cfg, w := archiveDB(t)
	first, second = uuid.NewString(), uuid.NewString()
	scope := `{"scope":"j.example /","limit":"500"}`
	t0 := recrawlStart
	for i, u := range []string{"same", "edited", "gone", "dropped"} {
		deliver(t, w, archivetest.ScopedVersion(t, first, "https://j.example/"+u, "text of "+u, 200, scope), t0.Add(time.Duration(i)*time.Second))
	}
	deliver(t, w, archivetest.EndEvent(first, "crawl.completed", scope), t0.Add(time.Minute))
	t1 := t0.Add(24 * time.Hour)
	for i, v := range []struct {
		u, md  string
		status int
	}{{"same", "text of same", 200}, {"edited", "text edited", 200}, {"gone", "", 404}, {"added", "text of added", 200}} {
		deliver(t, w, archivetest.ScopedVersion(t, second, "https://j.example/"+v.u, v.md, v.status, scope), t1.Add(time.Duration(i)*time.Second))
	}
	deliver(t, w, archivetest.EndEvent(second, "crawl.completed", scope), t1.Add(90*time.Second))
	return cfg, first, second
}

// A recrawl's page shows the counts its change summary carries (the
// summary is query.Reader.JobChanges under the sink's default
// CHANGES_MAX_URLS), over a real archive: a crawl of a scope, then a
// complete recrawl with a page unchanged, one edited, one gone (404), one
// no longer found and one new. Each count links to the search of its
// class in the job, and the removed URLs are listed.
func TestWebJobPageCountsAreTheSummarys(t *testing.T) {
	t.Parallel()
	cfg, _, second := recrawl(t)

	r, err := query.NewReader(clickhousetest.Open(t, cfg.Database), cfg)
	if err != nil {
		t.Fatal(err)
	}
	summary, err := r.JobChanges(context.Background(), second, query.ChangeQuery{MaxURLs: 100})
	if err != nil {
		t.Fatal(err)
	}
	if summary.New != 1 || summary.Changed != 1 || summary.Same != 1 || summary.Removed != 2 {
		t.Fatalf("fixture: summary %+v, want 1 new, 1 changed, 1 same, 2 removed", summary)
	}
	base := startReader(t, cfg, nil)
	resp, body := get(t, base+"/ui/jobs/"+second, testToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("job page: %d %s", resp.StatusCode, body)
	}
	page := string(body)
	for class, n := range map[string]uint64{"new": summary.New, "changed": summary.Changed, "same": summary.Same, "removed": summary.Removed} {
		m := regexp.MustCompile(`<a class="count-` + class + `" href="([^"]*)">(\d+)</a>`).FindStringSubmatch(page)
		if m == nil || m[2] != strconv.FormatUint(n, 10) {
			t.Errorf("%s: %v on the page, want %d", class, m, n)
			continue
		}
		u, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
		if class == events.ChangeRemoved {
			if err != nil || u.Path != "/ui/jobs/"+second || u.Fragment != "removed" {
				t.Errorf("removed links to %q, want the page's list of removed URLs", m[1])
			}
			continue
		}
		if err != nil || u.Query().Get("change") != class || u.Query().Get("job") != second {
			t.Errorf("%s links to %q", class, m[1])
		}
	}
	for _, u := range summary.RemovedURLs {
		if !strings.Contains(page, `class="url-link removed-url" href="/ui/page?url=`+url.QueryEscape(u)+`"`) {
			t.Errorf("removed %s not listed", u)
		}
	}
	for _, want := range []string{">completed</span>", "took 1m30s", `scope <span class="url">j.example /</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
}

// Syntax the search does not take is refused alike by the API (400 naming
// q) and the search page (400, the form with the reason).
func TestSearchRefusesOtherSyntax(t *testing.T) {
	t.Parallel()
	cfg, _ := archiveDB(t)
	base := startReader(t, cfg, nil)
	for _, q := range []string{"pricing OR plans", "pricing -draft", "pric*"} {
		var e reader.ErrorBody
		getJSON(t, base+"/v1/search?q="+url.QueryEscape(q), http.StatusBadRequest, &e)
		if e.Parameter != "q" || !strings.Contains(e.Message, "not supported") {
			t.Errorf("API, %q: %+v", q, e)
		}
		resp, body := get(t, base+"/ui/search?q="+url.QueryEscape(q), testToken)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `<p class="refused" role="alert">Not searched: `) ||
			!strings.Contains(string(body), `name="q" value="`) || !strings.Contains(string(body), "not supported") {
			t.Errorf("page, %q: %d\n%.3000s", q, resp.StatusCode, body)
		}
	}
}

// The jobs list shows each job's counts as its change summary counts them
// (JobsChangeCounts, one query for the page, against JobChanges job by
// job), over a real archive: the first crawl's four new URLs, the
// recrawl's new, changed, removed (a 404 and a URL no longer found) and
// same; each count links to the search of its class in its job, removed to
// the job page's list of every removed URL.
func TestWebJobsListCountsAreTheSummarys(t *testing.T) {
	t.Parallel()
	cfg, first, second := recrawl(t)
	r, err := query.NewReader(clickhousetest.Open(t, cfg.Database), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	counts, err := r.JobsChangeCounts(ctx, []uuid.UUID{uuid.MustParse(first), uuid.MustParse(second)})
	if err != nil {
		t.Fatal(err)
	}
	base := startReader(t, cfg, nil)
	resp, body := get(t, base+"/ui/jobs", testToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("jobs list: %d %s", resp.StatusCode, body)
	}
	for _, job := range []string{first, second} {
		summary, err := r.JobChanges(ctx, job, query.ChangeQuery{MaxURLs: 100})
		if err != nil {
			t.Fatal(err)
		}
		if got := counts[uuid.MustParse(job)]; got != summary.Counts() {
			t.Errorf("job %s: counted %+v, its summary %+v", job, got, summary.Counts())
		}
		row := regexp.MustCompile(`(?s)<tr>\s*<td data-label="Job"><a class="mono" href="/ui/jobs/` + job + `".*?</tr>`).FindString(string(body))
		for class, n := range map[string]uint64{"new": summary.New, "changed": summary.Changed, "same": summary.Same, "removed": summary.Removed} {
			m := regexp.MustCompile(`<a class="count-` + class + `" href="([^"]*)">(\d+)</a>`).FindStringSubmatch(row)
			if m == nil || m[2] != strconv.FormatUint(n, 10) {
				t.Errorf("job %s, %s: %v in its row, want %d", job, class, m, n)
				continue
			}
			u, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
			if class == events.ChangeRemoved {
				// Removed counts URLs no longer found, which no search of
				// the job shows: the count leads to the job's list of them.
				if err != nil || u.Path != "/ui/jobs/"+job || u.Fragment != "removed" {
					t.Errorf("job %s, removed links to %q, want its list of removed URLs", job, m[1])
				}
				checkRemovedList(t, base, job, summary.RemovedURLs)
				continue
			}
			if err != nil || u.Query().Get("change") != class || u.Query().Get("job") != job {
				t.Errorf("job %s, %s links to %q", job, class, m[1])
			}
		}
	}
	if c := counts[uuid.MustParse(second)]; c != (query.ChangeCounts{New: 1, Changed: 1, Same: 1, Removed: 2}) {
		t.Errorf("fixture: the recrawl's counts %+v", c)
	}
}

// checkRemovedList checks that job's page lists urls, its removed URLs, in
// the list its removed count links to.
func checkRemovedList(t *testing.T, base, job string, urls []string) {
	t.Helper()
	resp, body := get(t, base+"/ui/jobs/"+job, testToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("job page: %d %s", resp.StatusCode, body)
	}
	list := regexp.MustCompile(`(?s)<details class="removed" id="removed">.*?</details>`).FindString(string(body))
	var got []string
	for _, m := range regexp.MustCompile(`class="url-link removed-url" href="[^"]*">([^<]*)</a>`).FindAllStringSubmatch(list, -1) {
		got = append(got, html.UnescapeString(m[1]))
	}
	if strings.Join(got, " ") != strings.Join(urls, " ") {
		t.Errorf("job %s lists removed %q, want %q", job, got, urls)
	}
}
