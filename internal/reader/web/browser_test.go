package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
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
