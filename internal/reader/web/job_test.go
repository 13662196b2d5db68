package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
	"github.com/google/uuid"
	"golang.org/x/net/html"
)

// recrawl is two jobs of one scope: the first finds a, b and c; the second,
// cancelled, finds a unchanged, b edited, c gone (404) and d new.
func recrawl() (*archivetest.Archive, [2]uuid.UUID) {
	jobs := [2]uuid.UUID{uuid.MustParse("11111111-1111-4111-8111-111111111111"), uuid.MustParse("22222222-2222-4222-8222-222222222222")}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	a := &archivetest.Archive{}
	for i, id := range jobs {
		first, last := t0.Add(time.Duration(i)*24*time.Hour), t0.Add(time.Duration(i)*24*time.Hour+90*time.Minute+5*time.Second)
		event := []string{"crawl.completed", "crawl.cancelled"}[i]
		a.AddJob(query.JobStatus{Crawl: archive.Crawl{CrawlID: id, Kind: "crawl", FirstDeliveryAt: &first, LastDeliveryAt: &last, LastEvent: event}})
		a.AddScope(id, "https://example.org/")
		add := func(path string, status uint16, md string) {
			a.AddPage(query.ArchivedPage{CrawlID: id, URL: "https://example.org/" + path, Success: status == 200, StatusCode: status, ReceivedAt: first, Markdown: md})
		}
		add("a", 200, "same")
		add("b", 200, []string{"before", "after"}[i])
		if i == 0 {
			add("c", 200, "gone soon")
		} else {
			add("c", 404, "")
			add("d", 200, "new")
		}
	}
	return a, jobs
}

// A job's page shows its state and duration, its scope, the counts of each
// change class as the archive's JobChanges gives them (what its change
// summary publishes), each a link to the search of that class in the job
// (removed: to the job's list of removed URLs, beside the gone pages'
// search), and its exports.
func TestJobPageShowsChanges(t *testing.T) {
	a, jobs := recrawl()
	srv := startPages(t, a)
	want, err := a.JobChanges(context.Background(), jobs[1].String(), query.ChangeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if want.New != 1 || want.Changed != 1 || want.Removed != 1 || want.Same != 1 {
		t.Fatalf("fixture: changes %+v, want one of each", want)
	}
	res := get(t, srv, base+"/jobs/"+jobs[1].String())
	if res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	doc, err := html.Parse(strings.NewReader(res.body))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{"new": want.New, "changed": want.Changed, "removed": want.Removed, "same": want.Same}
	for class, n := range counts {
		link := find(doc, "a", "class", "count-"+class)
		if link == nil {
			t.Fatalf("no link of the %s count", class)
		}
		if got := text(link); got != strconv.FormatUint(n, 10) {
			t.Errorf("%s count %q, want %d", class, got, n)
		}
		u, err := url.Parse(attr(link, "href"))
		if class == events.ChangeRemoved {
			// URLs no longer found have no page in the job to search: the
			// count leads to the job's list of removed URLs, which links
			// the gone pages' search.
			gone := find(doc, "a", "class", "gone-search")
			if err != nil || u.Path != base+"/jobs/"+jobs[1].String() || u.Fragment != "removed" || find(doc, "details", "id", "removed") == nil || gone == nil {
				t.Errorf("removed count links to %q, want the job's list of removed URLs", attr(link, "href"))
				continue
			}
			u, err = url.Parse(attr(gone, "href"))
		}
		if err != nil || u.Path != base+"/search" || u.Query().Get("job") != jobs[1].String() || u.Query().Get("change") != class {
			t.Errorf("%s count links to %q, want the search of that class in the job", class, attr(link, "href"))
			continue
		}
		found := get(t, srv, u.RequestURI())
		if strings.Count(found.body, `class="hit"`) != int(n) {
			t.Errorf("the %s link finds %d hits, want %d", class, strings.Count(found.body, `class="hit"`), n)
		}
	}
	state := text(find(doc, "p", "class", "job-state"))
	for _, w := range []string{"cancelled", "took 1h30m5s", "scope https://example.org/"} {
		if !strings.Contains(state, w) {
			t.Errorf("job state %q lacks %q", state, w)
		}
	}
	for _, f := range []string{"ndjson", "parquet", "warc", "cdxj", "wacz"} {
		if !strings.Contains(res.body, `href="/v1/jobs/`+jobs[1].String()+`/export?format=`+f+`"`) {
			t.Errorf("no export link for %s", f)
		}
	}
	list := get(t, srv, base+"/jobs").body
	for _, w := range []string{">completed<", ">cancelled<", "1h30m5s"} {
		if !strings.Contains(list, w) {
			t.Errorf("jobs list lacks %q", w)
		}
	}
}

// find is the first element named tag whose attribute key is val.
func find(n *html.Node, tag, key, val string) *html.Node {
	if n.Type == html.ElementNode && n.Data == tag && attr(n, key) == val {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, tag, key, val); f != nil {
			return f
		}
	}
	return nil
}

// text is the text of n and its children, spaces collapsed.
func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// A failure links to its page as archived, at its history (the failed
// version and the good ones around it), never to the live site; a failure
// whose delivery named no page is no link at all.
func TestFailuresLinkToHistory(t *testing.T) {
	a, jobs := recrawl()
	a.AddFailure(jobs[1], query.FailedPage{URL: "https://example.org/c", StatusCode: 404, Reason: "failed", Error: "HTTP 404"})
	a.AddFailure(jobs[1], query.FailedPage{Reason: "failed", Error: "no data"})
	srv := startPages(t, a)
	res := get(t, srv, base+"/failures?job="+jobs[1].String())
	doc, err := html.Parse(strings.NewReader(res.body))
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "td" && attr(n, "data-label") == "URL" {
			if a := find(n, "a", "class", "url-link"); a != nil {
				links = append(links, attr(a, "href"))
			} else {
				links = append(links, "no link: "+text(n))
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	want := []string{base + "/page?" + url.Values{"job": {jobs[1].String()}, "url": {"https://example.org/c"}}.Encode() + "#history", "no link: none (the delivery named no page)"}
	if len(links) != 2 || links[0] != want[0] || links[1] != want[1] {
		t.Fatalf("failure links %q, want %q", links, want)
	}
	page := get(t, srv, strings.TrimSuffix(links[0], "#history"))
	if page.status != 200 || !strings.Contains(page.body, `<section class="history" id="history">`) {
		t.Errorf("the failure's page: %d\n%.2000s", page.status, page.body)
	}
}

// The jobs list's kind filter offers the archive's kinds in their human
// wording and keeps the one chosen.
func TestJobsKindFilter(t *testing.T) {
	a, _ := recrawl()
	srv := startPages(t, a)
	for kind, want := range map[string]string{
		"":             `<option value="crawl">crawl</option>`,
		"batch_scrape": `<option value="batch_scrape" selected>batch scrape</option>`,
		"crawl":        `<option value="crawl" selected>crawl</option>`,
	} {
		res := get(t, srv, base+"/jobs?kind="+kind)
		if res.status != 200 || !strings.Contains(string(res.body), want) {
			t.Errorf("kind %q: %d, want %s in\n%s", kind, res.status, want, res.body)
		}
	}
}

// The jobs list stands without its change counts when they pass the read
// limits or the archive is busy, as a job's answer stands without its
// summary: every job listed, a note saying why, no count (a 0 would be
// false). Any other failure of the counts is the page's error.
func TestJobsListWithoutCounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
	}{
		{"past the limits", fmt.Errorf("changes of the jobs: %w", query.ErrLimit), 200},
		{"busy", query.ErrBusy, 200},
		{"other", errors.New("connection reset"), 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, jobs := recrawl()
			a.Hold = func(_ context.Context, method string) error {
				if method == "JobsChangeCounts" {
					return tc.err
				}
				return nil
			}
			srv := startPages(t, a)
			res := get(t, srv, base+"/jobs")
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %.2000s", res.status, tc.status, res.body)
			}
			if tc.status != 200 {
				return
			}
			for _, j := range jobs {
				if !strings.Contains(res.body, `href="`+base+`/jobs/`+j.String()+`"`) {
					t.Errorf("job %s not listed", j)
				}
			}
			if !strings.Contains(res.body, `class="note counts-omitted"`) || strings.Contains(res.body, `class="count-`) {
				t.Errorf("no note, or counts shown:\n%.3000s", res.body)
			}
		})
	}
}
