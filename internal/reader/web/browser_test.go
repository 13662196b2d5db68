package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/rs/zerolog"
)

// beacon is a local listener that hostile content tries to reach: any
// request it gets is a script or resource of a crawled page that ran or
// loaded in the reader's browser.
type beacon struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

func startBeacon(t *testing.T) *beacon {
	t.Helper()
	b := &beacon{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.hits = append(b.hits, r.Method+" "+r.URL.Path)
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/javascript")
		w.Write([]byte("window.__pwned = 'beacon';"))
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *beacon) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.hits...)
}

// waitFor polls cond until it holds; what is named in the failure. The
// deadline only keeps a broken run from hanging: the test asserts that the
// thing happens, not how fast.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
	}
}

// violated reports whether the browser reported a CSP violation whose
// text contains all of parts.
func violated(b *browsertest.Browser, parts ...string) bool {
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

// clickThrough is what a reader does, in a real browser, on pages whose
// crawled content is hostile: search, open a hit, see its history, open its
// html, open a diff. Nothing of the crawled content may run or reach the
// beacon, and the browser must report the CSP blocking the resources the
// content asks for.
func clickThrough(t *testing.T, b *browsertest.Browser, pagesURL string, bc *beacon, logged *logtest.Buffer) {
	t.Helper()
	b.Do(t,
		chromedp.Navigate(pagesURL+"/search"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=q]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=q]`), "zebrafish"),
		chromedp.Submit(chromedp.CSS(`input[name=q]`)),
		chromedp.WaitVisible(chromedp.CSS(`li.hit`)),
	)
	hits := browsertest.Run(t, b, chromedp.Evaluate[int](`document.querySelectorAll('li.hit').length`))
	if hits == 0 {
		t.Fatal("search found nothing")
	}
	b.Do(t,
		chromedp.Click(chromedp.CSS(`li.hit a.hit-title[href*="example.org%2Fhostile"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section.history`)),
	)
	versions := browsertest.Run(t, b, chromedp.Evaluate[int](`document.querySelectorAll('section.history tbody tr').length`))
	if versions != 2 {
		t.Errorf("history shows %d versions, want 2", versions)
	}
	// The markdown's image of the beacon is refused by the CSP.
	waitFor(t, "a CSP violation for the markdown's beacon image", func() bool { return violated(b, bc.URL+"/md-img.png", "img-src") })
	// The archived html, in its sandbox: its image is refused by the CSP
	// the sandboxed document inherits, its scripts by the sandbox.
	b.Do(t,
		chromedp.Click(chromedp.CSS(`details.html-rendered summary`)),
		chromedp.WaitVisible(chromedp.CSS(`iframe.html-preview`)),
	)
	// It runs in a process of its own (site isolation), whose messages this
	// tab does not see: the violation report the browser posts to the pages
	// is what shows the CSP at work there.
	waitFor(t, "a CSP violation report for the archived html's beacon image", func() bool {
		return strings.Contains(logged.String(), `"blocked":"`+bc.URL+`/html-img.png"`)
	})
	b.Do(t,
		chromedp.Click(chromedp.CSS(`a.diff-link`)),
		chromedp.WaitVisible(chromedp.CSS(`.diff .op-add`)),
	)
	added := browsertest.Run(t, b, chromedp.Text(chromedp.CSS(`.diff .op-add`)))
	removed := browsertest.Run(t, b, chromedp.Text(chromedp.CSS(`.diff .op-del`)))
	if !strings.Contains(added, "zebrafish now is") || !strings.Contains(removed, "zebrafish is") {
		t.Errorf("diff shows added %q removed %q", added, removed)
	}
	assertNothingRan(t, b, bc)
}

// assertNothingRan checks the tab for every effect the hostile content
// tries: a global set, the title changed, a request to the beacon.
func assertNothingRan(t *testing.T, b *browsertest.Browser, bc *beacon) {
	t.Helper()
	if pwned := browsertest.Run(t, b, chromedp.Evaluate[string](`String(window.__pwned)`)); pwned != "undefined" {
		t.Errorf("a crawled script ran: window.__pwned = %q", pwned)
	}
	if title := browsertest.Run(t, b, chromedp.Title()); strings.Contains(title, "pwned") {
		t.Errorf("a crawled script ran: title %q", title)
	}
	if got := bc.requests(); len(got) > 0 {
		t.Errorf("crawled content reached the beacon: %v", got)
	}
	for _, e := range b.Entries() {
		t.Logf("browser: %s", e)
	}
}

func TestBrowserClickThroughHostilePages(t *testing.T) {
	b := browsertest.Start(t)
	bc := startBeacon(t)
	arch, _ := hostileArchive(bc.URL)
	logged := &logtest.Buffer{}
	srv := startPagesLogging(t, arch, zerolog.New(logged))
	clickThrough(t, b, srv.URL+base, bc, logged)
}

// Were the sanitiser ever bypassed, the CSP alone still blocks the script:
// the pages are served with script injected after rendering, and the
// browser must refuse it and report the violation.
func TestBrowserCSPBlocksScriptPastTheSanitiser(t *testing.T) {
	b := browsertest.Start(t)
	bc := startBeacon(t)
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
	waitFor(t, "CSP violations for the injected inline script, script src, image and handler", func() bool {
		return violated(b, "inline script", "script-src 'none'") && violated(b, bc.URL+"/injected.js") &&
			violated(b, bc.URL+"/injected.png") && violated(b, "event handler")
	})
	assertNothingRan(t, b, bc)
}
