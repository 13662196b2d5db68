package browsertest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Hostile crawled content: every field a crawled site controls, carrying
// script every way we know. Each script, if it ran, would set
// window.__pwned or the document's title to "pwned", or reach beacon (a
// Beacon's URL).

// HostileWord is a word every hostile page holds, for a search to find.
const HostileWord = "zebrafish"

// HostileTitle breaks out of attributes, elements and <title>.
const HostileTitle = `</title><script>window.__pwned='title'</script>"><img src=x onerror="window.__pwned='title-img'"> ` + HostileWord

// HostileURL is a page URL that is a script when used as a link.
const HostileURL = `javascript:window.__pwned='url'//https://example.org/`

// HostileError is a failure's error text carrying script.
const HostileError = `<img src=x onerror="window.__pwned='failure'"><script>document.title='pwned'</script>`

// HostileMarkdown is markdown carrying script; changed gives the second
// version of the page (one line differs: "zebrafish is" becomes "zebrafish
// now is").
func HostileMarkdown(beacon string, changed bool) string {
	first := "The word " + HostileWord + " is what the search looks for."
	if changed {
		first = "The word " + HostileWord + " now is what the search looks for."
	}
	return strings.Join([]string{
		"# Hostile page",
		first,
		"<script>window.__pwned = 'md-script'; document.title = 'pwned'</script>",
		"<img src=x onerror=\"window.__pwned='md-onerror'\">",
		"<svg onload=\"window.__pwned='md-svg'\"><script>window.__pwned='md-svg-script'</script></svg>",
		"<iframe srcdoc=\"<script>parent.__pwned='md-srcdoc'</script>\"></iframe>",
		"[js link](javascript:window.__pwned='md-js-link')",
		"[mixed case](JaVaScRiPt:alert(1))",
		"[entity](&#106;avascript:alert(1))",
		"[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
		"![data svg](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
		"[vb](vbscript:msgbox(1))",
		"<javascript:alert(1)>",
		"<a href=\"javascript:window.__pwned='md-a'\">raw anchor</a>",
		"<style>body{background:url(" + beacon + "/md-style)}</style>",
		"![beacon](" + beacon + "/md-img.png)",
		"[a fine link](https://example.org/fine)",
		"[title attr](https://example.org/t \"\\\" onmouseover=\\\"alert(1)\")",
	}, "\n\n")
}

// HostileHTML is a whole html document carrying script, one that tries to
// break out of an attribute holding it, and resources on beacon.
func HostileHTML(beacon string) string {
	return `<html><head><title>x</title><base href="` + beacon + `/"><meta http-equiv="refresh" content="0;url=` + beacon + `/html-refresh">` +
		`<script src="` + beacon + `/html-script.js"></script><link rel="stylesheet" href="` + beacon + `/html.css"></head>` +
		`<body onload="parent.__pwned='html-onload'"><script>parent.__pwned='html-script';top.document.title='pwned'</script>` +
		`<img src="` + beacon + `/html-img.png" onerror="parent.__pwned='html-onerror'">` +
		`"></iframe><script>window.__pwned='html-breakout'</script>` +
		`<form action="` + beacon + `/html-form"><input name=a value=b></form></body></html>`
}

// Beacon is a local listener that hostile content tries to reach: any
// request it gets is a script or resource of a crawled page that ran or
// loaded in the reader's browser.
type Beacon struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

// StartBeacon starts a Beacon for t, closed when t ends. It answers every
// request with a script that would set window.__pwned.
func StartBeacon(t testing.TB) *Beacon {
	t.Helper()
	b := &Beacon{}
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

// Requests returns the requests the beacon got ("GET /md-img.png").
func (b *Beacon) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.hits...)
}
