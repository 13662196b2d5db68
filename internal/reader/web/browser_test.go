package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// The pages over hostile content in a real browser: search, history, the
// html sandbox and a diff, and nothing of the content runs. The same click
// through runs over the real archive in internal/e2e.
func TestBrowserClickThroughHostilePages(t *testing.T) {
	b := browsertest.Start(t)
	bc := browsertest.StartBeacon(t)
	arch, _ := hostileArchive(bc.URL)
	logged := &logtest.Buffer{}
	srv := startPagesLogging(t, arch, zerolog.New(logged))
	browsertest.ClickThrough(t, b, srv.URL+base, "https://example.org/hostile", bc, logged.String)
}

// Were the sanitiser ever bypassed, the CSP alone still blocks the script:
// the pages are served with script injected after rendering, and the
// browser must refuse it and report the violation.
func TestBrowserCSPBlocksScriptPastTheSanitiser(t *testing.T) {
	b := browsertest.Start(t)
	bc := browsertest.StartBeacon(t)
	arch, jobs := hostileArchive(bc.URL)
	pages := startPages(t, arch)
	injected := `<script>window.__pwned='inline'; document.title='pwned'</script>` +
		`<script src="` + bc.URL + `/injected.js"></script>` +
		`<img src="` + bc.URL + `/injected.png"><img src="x" onerror="window.__pwned='onerror'"></main>`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := pages.Client().Get(pages.URL + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(resp.StatusCode)
		w.Write([]byte(strings.Replace(string(body), "</main>", injected, 1)))
	}))
	t.Cleanup(srv.Close)

	b.Do(t,
		chromedp.Navigate(srv.URL+base+"/jobs/"+jobs[0]),
		chromedp.WaitVisible(chromedp.CSS(`dl.facts`)),
	)
	browsertest.WaitFor(t, "CSP violations for the injected inline script, script src, image and handler", func() bool {
		return b.Violated("inline script", "script-src 'none'") && b.Violated(bc.URL+"/injected.js") &&
			b.Violated(bc.URL+"/injected.png") && b.Violated("event handler")
	})
	browsertest.AssertNothingRan(t, b, bc)
}

// overflowing lists the elements of the page in the tab that reach past
// the viewport's width (none on a page that fits the screen), with the
// document's own width when it does.
const overflowing = `(() => {
  const w = document.documentElement.clientWidth, out = [];
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > w + 1 || r.left < -1)) {
      out.push(e.tagName.toLowerCase() + '.' + e.className + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
  }
  if (document.documentElement.scrollWidth > w) out.push('document ' + document.documentElement.scrollWidth + 'px');
  return out.join('\n');
})()`

// On a phone (390 CSS pixels wide) every page fits the screen: no table,
// URL, form or diff is wider than the viewport, whatever the crawled
// content's length.
func TestBrowserPagesFitAPhone(t *testing.T) {
	b := browsertest.Start(t)
	bc := browsertest.StartBeacon(t)
	arch, jobs := hostileArchive(bc.URL)
	long := "https://example.org/" + strings.Repeat("a-very-long-path-segment-without-spaces", 12)
	arch.AddPage(query.ArchivedPage{URL: long, CrawlID: uuid.MustParse(jobs[1]), Title: strings.Repeat("Longtitlewithoutspaces", 10), Success: true, StatusCode: 200,
		ReceivedAt: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), Markdown: strings.Repeat("wordwithoutanyspaceatall", 40)})
	arch.AddFailure(uuid.MustParse(jobs[1]), query.FailedPage{URL: long, StatusCode: 503, Reason: "failed", Error: strings.Repeat("errorwithoutspaces", 20)})
	srv := startPages(t, arch)
	b.Do(t, chromedp.EmulateViewport(390, 844))
	for _, path := range []string{
		"/jobs", "/jobs/" + jobs[1], "/failures", "/failures?job=" + jobs[1],
		"/search?job=" + jobs[1], "/search?q=" + url.QueryEscape("a OR b"),
		pageQuery(long, jobs[1])[len(base):], pageQuery("https://example.org/hostile", jobs[1])[len(base):],
		"/diff?" + url.Values{"url": {"https://example.org/hostile"}}.Encode(),
	} {
		b.Do(t, chromedp.Navigate(srv.URL+base+path), chromedp.WaitVisible(chromedp.CSS(`main`)))
		if wide := browsertest.Run(t, b, chromedp.Evaluate[string](overflowing)); wide != "" {
			t.Errorf("%s is wider than a phone:\n%s", path, wide)
		}
	}
}

// A reader opens a recrawl's page, follows its "changed" count to the
// changed page, and sees there what changed since the version before, the
// changed word marked.
func TestBrowserJobCountsLeadToTheChange(t *testing.T) {
	b := browsertest.Start(t)
	a, jobs := recrawl()
	srv := startPages(t, a)
	b.Do(t,
		chromedp.Navigate(srv.URL+base+"/jobs/"+jobs[1].String()),
		chromedp.WaitVisible(chromedp.CSS(`a.count-changed`)),
	)
	if n := browsertest.Run(t, b, chromedp.Text(chromedp.CSS(`a.count-changed`))); n != "1" {
		t.Fatalf("changed count %q, want 1", n)
	}
	b.Do(t,
		chromedp.Click(chromedp.CSS(`a.count-changed`)),
		chromedp.WaitVisible(chromedp.CSS(`li.hit a.hit-title`)),
	)
	if hits := browsertest.Run(t, b, chromedp.Evaluate[string](`[...document.querySelectorAll('li.hit a.hit-title')].map(a => a.textContent).join(' ')`)); hits != "https://example.org/b" {
		t.Fatalf("the changed count leads to %q, want the edited page", hits)
	}
	b.Do(t,
		chromedp.Click(chromedp.CSS(`li.hit a.hit-title`)),
		chromedp.WaitVisible(chromedp.CSS(`section.changes`)),
	)
	if marked := browsertest.Run(t, b, chromedp.Text(chromedp.CSS(`section.changes tr.op-add mark.word`))); marked != "after" {
		t.Errorf("the added line marks %q, want after", marked)
	}
	if marked := browsertest.Run(t, b, chromedp.Text(chromedp.CSS(`section.changes tr.op-del mark.word`))); marked != "before" {
		t.Errorf("the removed line marks %q, want before", marked)
	}
}

// A reader opens the jobs list, reads each job's counts in its row (the
// recrawl's as its change summary counts them), follows the recrawl's
// "changed" count and lands on the search of that class in that job.
func TestBrowserJobsListCountsLeadToTheChange(t *testing.T) {
	b := browsertest.Start(t)
	a, jobs := recrawl()
	srv := startPages(t, a)
	want, err := a.JobChanges(context.Background(), jobs[1].String(), query.ChangeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	row := `tr:has(a[href$="/jobs/` + jobs[1].String() + `"]) `
	b.Do(t,
		chromedp.Navigate(srv.URL+base+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS(row+`a.count-changed`)),
	)
	for class, n := range map[string]uint64{"new": want.New, "changed": want.Changed, "removed": want.Removed, "same": want.Same} {
		if got := browsertest.Run(t, b, chromedp.Text(chromedp.CSS(row+`a.count-`+class))); got != strconv.FormatUint(n, 10) {
			t.Errorf("%s: %q in the recrawl's row, want %d", class, got, n)
		}
	}
	b.Do(t,
		chromedp.Click(chromedp.CSS(row+`a.count-changed`)),
		chromedp.WaitVisible(chromedp.CSS(`li.hit a.hit-title`)),
	)
	if hits := browsertest.Run(t, b, chromedp.Evaluate[string](`[...document.querySelectorAll('li.hit a.hit-title')].map(a => a.textContent).join(' ')`)); hits != "https://example.org/b" {
		t.Fatalf("the changed count leads to %q, want the edited page", hits)
	}
	// The removed count counts URLs no longer found too, which have no page
	// in the job for a search to show: it leads to the job's list of them,
	// opened.
	b.Do(t,
		chromedp.Navigate(srv.URL+base+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS(row+`a.count-removed`)),
		chromedp.Click(chromedp.CSS(row+`a.count-removed`)),
		chromedp.WaitVisible(chromedp.CSS(`details#removed a.removed-url`)),
	)
	removed := browsertest.Run(t, b, chromedp.Evaluate[string](`[...document.querySelectorAll('details#removed[open] a.removed-url')].map(a => a.textContent).join(' ')`))
	if want.Removed == 0 || removed != strings.Join(want.RemovedURLs, " ") {
		t.Errorf("the removed count (%d) leads to %q, want %q", want.Removed, removed, want.RemovedURLs)
	}
}
