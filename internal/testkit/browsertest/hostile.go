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

// HostileHints is a whole html document that asks the browser to reach
// each of origins ("http://127.0.0.2:8080") every way a document can
// without running script: resource hints (preconnect, dns-prefetch,
// prefetch, prerender, preload, modulepreload, speculation rules), head
// elements (stylesheet, icon, manifest, meta refresh, meta Link, base with
// relative URLs), the same hints in the body and in noscript (markup in a
// document without script), and every element and attribute that loads a
// resource or sends a ping. None of them may reach an origin from the
// read API's pages.
func HostileHints(origins ...string) string {
	var head, body strings.Builder
	head.WriteString(`<html><head><title>hints</title>`)
	for _, o := range origins {
		for _, link := range []string{
			`rel="preconnect" href="` + o + `"`,
			`rel="preconnect" href="` + o + `/" crossorigin`,
			`rel="dns-prefetch" href="` + o + `"`,
			`rel="prefetch" href="` + o + `/prefetch"`,
			`rel="prerender" href="` + o + `/prerender"`,
			`rel="preload" href="` + o + `/preload.css" as="style"`,
			`rel="preload" href="` + o + `/preload.png" as="image"`,
			`rel="preload" href="` + o + `/preload.woff2" as="font" crossorigin`,
			`rel="preload" href="` + o + `/preload.json" as="fetch" crossorigin`,
			`rel="modulepreload" href="` + o + `/module.js"`,
			`rel="stylesheet" href="` + o + `/style.css"`,
			`rel="icon" href="` + o + `/favicon.ico"`,
			`rel="manifest" href="` + o + `/manifest.json"`,
			`rel="next" href="` + o + `/next"`,
		} {
			head.WriteString(`<link ` + link + `>`)
		}
		head.WriteString(`<meta http-equiv="Link" content="<` + o + `/meta-link>; rel=preconnect">`)
		head.WriteString(`<script type="speculationrules">{"prefetch":[{"source":"list","urls":["` + o + `/speculation"]}]}</script>`)
		body.WriteString(`<link rel="preconnect" href="` + o + `/body"><noscript><link rel="preconnect" href="` + o + `/noscript"><img src="` + o + `/noscript.png"></noscript>` +
			`<img src="` + o + `/img.png" srcset="` + o + `/img2.png 2x"><picture><source srcset="` + o + `/picture.png"><img alt="p"></picture>` +
			`<video poster="` + o + `/poster.png" src="` + o + `/video.mp4"></video><audio src="` + o + `/audio.mp3"></audio>` +
			`<iframe src="` + o + `/frame"></iframe><object data="` + o + `/object"></object><embed src="` + o + `/embed">` +
			`<input type="image" src="` + o + `/input.png"><table background="` + o + `/table.png"><tr><td>cell</td></tr></table>` +
			`<svg><image href="` + o + `/svg.png"/></svg><div style="background:url(` + o + `/inline-style.png)">styled</div>` +
			`<style>@import url(` + o + `/import.css); p{background:url(` + o + `/style.png)}</style>` +
			`<a href="` + o + `/a" ping="` + o + `/ping">a link</a><form action="` + o + `/form"><button>go</button></form>`)
	}
	head.WriteString(`<meta http-equiv="refresh" content="0;url=` + origins[0] + `/refresh"><base href="` + origins[0] + `/base/"></head>`)
	return head.String() + `<body background="` + origins[0] + `/body.png"><p>` + HostileWord + ` hints</p><img src="relative.png"><a href="relative">relative</a>` +
		body.String() + `</body></html>`
}
