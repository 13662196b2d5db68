package browsertest

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ClickThrough is what a reader does on the read API's web pages
// (internal/reader/web) over an archive holding the hostile page: it
// searches for HostileWord, opens the hit of pageURL, sees its history (at
// least two versions), opens its html in the sandbox and the diff with the
// previous version, which must show the line HostileMarkdown changes.
// Nothing of the crawled content may run or reach beacon; the browser
// must report the CSP refusing the markdown's beacon image. The sandboxed
// html holds nothing that names a resource, so logs (what the pages logged
// so far) must show no violation report of the html's.
func ClickThrough(t testing.TB, b *Browser, pagesURL, pageURL string, beacon *Beacon, logs func() string) {
	t.Helper()
	b.Do(t,
		chromedp.Navigate(pagesURL+"/search"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=q]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=q]`), HostileWord),
		chromedp.Submit(chromedp.CSS(`input[name=q]`)),
		chromedp.WaitVisible(chromedp.CSS(`li.hit`)),
	)
	hit := `li.hit a.hit-title[href*="url=` + url.QueryEscape(pageURL) + `"]`
	if n := Run(t, b, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(hit)+`).length`)); n == 0 {
		t.Fatalf("search for %q did not find %s", HostileWord, pageURL)
	}
	b.Do(t,
		chromedp.Click(chromedp.CSS(hit)),
		chromedp.WaitVisible(chromedp.CSS(`section.history`)),
	)
	if n := Run(t, b, chromedp.Evaluate[int](`document.querySelectorAll('section.history tbody tr').length`)); n < 2 {
		t.Errorf("history shows %d versions, want at least 2", n)
	}
	WaitFor(t, "a CSP violation for the markdown's beacon image", func() bool {
		return b.Violated(beacon.URL+"/md-img.png", "img-src")
	})
	// The archived html in its sandbox, as text and structure only.
	b.Do(t,
		chromedp.Click(chromedp.CSS(`details.html-rendered summary`)),
		chromedp.WaitVisible(chromedp.CSS(`iframe.html-preview`)),
	)
	if n := Run(t, b, chromedp.Evaluate[int](`document.querySelectorAll('a.diff-link').length`)); n == 0 {
		t.Fatal("the history offers no diff with a previous version")
	}
	b.Do(t,
		chromedp.Click(chromedp.CSS(`a.diff-link`)),
		chromedp.WaitVisible(chromedp.CSS(`.diff .op-add`)),
	)
	added := Run(t, b, chromedp.Text(chromedp.CSS(`.diff .op-add`)))
	removed := Run(t, b, chromedp.Text(chromedp.CSS(`.diff .op-del`)))
	if !strings.Contains(added, HostileWord+" now is") || !strings.Contains(removed, HostileWord+" is") {
		t.Errorf("diff shows added %q removed %q", added, removed)
	}
	if l := logs(); strings.Contains(l, beacon.URL+"/html-") {
		t.Errorf("the sandboxed html asked for a resource of the beacon:\n%s", l)
	}
	AssertNothingRan(t, b, beacon)
}

// AssertNothingRan checks the tab for every effect hostile content tries:
// window.__pwned set, the title changed, a request to the beacon. It logs
// what the browser reported, for the reader of a failure.
func AssertNothingRan(t testing.TB, b *Browser, beacon *Beacon) {
	t.Helper()
	if pwned := Run(t, b, chromedp.Evaluate[string](`String(window.__pwned)`)); pwned != "undefined" {
		t.Errorf("a crawled script ran: window.__pwned = %q", pwned)
	}
	if title := Run(t, b, chromedp.Title()); strings.Contains(title, "pwned") {
		t.Errorf("a crawled script ran: title %q", title)
	}
	if got := beacon.Requests(); len(got) > 0 {
		t.Errorf("crawled content reached the beacon: %v", got)
	}
	if t.Failed() {
		for _, e := range b.Entries() {
			t.Logf("browser: %s", e)
		}
	}
}

// WaitFor polls cond until it holds; what names it in the failure. The
// deadline only keeps a broken run from hanging: tests assert that a thing
// happens, not how fast.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
	}
}

// Violated reports whether the browser reported a CSP violation whose text
// contains all of parts.
func (b *Browser) Violated(parts ...string) bool {
	for _, v := range b.Violations() {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(v.Text, p)
		}
		if all {
			return true
		}
	}
	return false
}
