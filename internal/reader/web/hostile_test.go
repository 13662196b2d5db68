package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"golang.org/x/net/html"
)

// Hostile crawled content: every field a crawled site controls, carrying
// script every way we know. beacon is a URL the content tries to reach
// (a local listener in the browser test); __pwned is what its scripts
// would set.
func hostileMarkdown(beacon string) string {
	return strings.Join([]string{
		"# Hostile page",
		"The word zebrafish is what the search looks for.",
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

func hostileHTML(beacon string) string {
	return `<html><head><title>x</title><base href="` + beacon + `/"><meta http-equiv="refresh" content="0;url=` + beacon + `/html-refresh">` +
		`<script src="` + beacon + `/html-script.js"></script><link rel="stylesheet" href="` + beacon + `/html.css"></head>` +
		`<body onload="parent.__pwned='html-onload'"><script>parent.__pwned='html-script';top.document.title='pwned'</script>` +
		`<img src="` + beacon + `/html-img.png" onerror="parent.__pwned='html-onerror'">` +
		`"></iframe><script>window.__pwned='html-breakout'</script>` +
		`<form action="` + beacon + `/html-form"><input name=a value=b></form></body></html>`
}

// hostileTitle and hostileURL break out of attributes, elements and the
// <title> element.
const (
	hostileTitle = `</title><script>window.__pwned='title'</script>"><img src=x onerror="window.__pwned='title-img'"> zebrafish`
	hostileURL   = `javascript:window.__pwned='url'//https://example.org/`
)

// hostileJobs are two jobs with the hostile page, the second changed, and a
// hostile failure.
func hostileArchive(beacon string) (*memArchive, [2]string) {
	jobs := [2]string{"0b6f8a5e-3c1d-4e2f-9a7b-1c2d3e4f5a6b", "7e1d2c3b-4a5f-4e6d-8c7b-9a0b1c2d3e4f"}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	m := &memArchive{}
	for i, id := range jobs {
		at := t0.Add(time.Duration(i) * 24 * time.Hour)
		last := at.Add(time.Hour)
		m.jobs = append(m.jobs, web.Job{ID: id, Kind: "crawl", FirstDeliveryAt: &at, LastDeliveryAt: &last, PagesReceived: 2, Failures: 1,
			TopErrors: []web.ErrorCount{{Error: "<script>window.__pwned='error'</script>", Pages: 1}}})
		md := hostileMarkdown(beacon)
		if i == 1 {
			md = strings.Replace(md, "zebrafish is", "zebrafish now is", 1)
		}
		for _, u := range []string{hostileURL, "https://example.org/hostile"} {
			m.pages = append(m.pages, web.Page{URL: u, JobID: id, Title: hostileTitle, Success: true, StatusCode: 200,
				ReceivedAt: at, Markdown: md, HTML: hostileHTML(beacon)})
		}
		m.failures = append(m.failures, web.Failure{JobID: id, URL: hostileURL, StatusCode: 500, Reason: "failed",
			Error: `<img src=x onerror="window.__pwned='failure'">`, ReceivedAt: at})
	}
	return m, jobs
}

// assertInert fails unless the HTML document doc can run no script and
// reach no other host: no script-capable element, no event handler or
// style attribute, no URL attribute other than the pages' own paths
// (under base) and absolute http(s) or mailto links, and iframes only
// sandboxed without allow-scripts. An iframe's srcdoc is not inspected:
// the sandbox is what keeps it inert.
func assertInert(t *testing.T, doc, base string) {
	t.Helper()
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			checkElement(t, n, base)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
}

func checkElement(t *testing.T, n *html.Node, base string) {
	t.Helper()
	switch n.Data {
	case "script", "object", "embed", "applet", "base", "style", "svg", "math", "frame", "frameset", "noscript", "template":
		t.Errorf("element <%s> in the page", n.Data)
	case "meta":
		if attr(n, "http-equiv") != "" {
			t.Errorf("<meta http-equiv=%q>", attr(n, "http-equiv"))
		}
	case "link":
		if attr(n, "rel") != "stylesheet" || attr(n, "href") != base+"/static/style.css" {
			t.Errorf("<link rel=%q href=%q>", attr(n, "rel"), attr(n, "href"))
		}
	case "iframe":
		sandbox, ok := hasAttr(n, "sandbox")
		if !ok || strings.Contains(sandbox, "allow-scripts") || strings.Contains(sandbox, "allow-same-origin") {
			t.Errorf("<iframe> sandbox=%q (present %v)", sandbox, ok)
		}
		if _, ok := hasAttr(n, "src"); ok {
			t.Errorf("<iframe src=%q>", attr(n, "src"))
		}
	case "form":
		if !strings.HasPrefix(attr(n, "action"), base+"/") {
			t.Errorf("<form action=%q>", attr(n, "action"))
		}
	}
	for _, a := range n.Attr {
		k := strings.ToLower(a.Key)
		switch {
		case strings.HasPrefix(k, "on"), k == "style", k == "formaction", k == "srcset", k == "xlink:href", k == "background", k == "poster":
			t.Errorf("<%s %s=%q>", n.Data, a.Key, a.Val)
		case k == "href" || k == "src" || k == "action" || k == "data":
			if !safeURL(a.Val, base) {
				t.Errorf("<%s %s=%q>", n.Data, a.Key, a.Val)
			}
		}
	}
}

func safeURL(v, base string) bool {
	v = strings.TrimSpace(v)
	switch {
	case strings.HasPrefix(v, base+"/") && !strings.HasPrefix(v, "//"):
		return true
	case strings.HasPrefix(v, "https://"), strings.HasPrefix(v, "http://"), strings.HasPrefix(v, "mailto:"):
		return true
	}
	return false
}

func attr(n *html.Node, key string) string {
	v, _ := hasAttr(n, key)
	return v
}

func hasAttr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}
