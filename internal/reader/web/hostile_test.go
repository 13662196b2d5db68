package web_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
	"github.com/google/uuid"
	"golang.org/x/net/html"
)

// hostileArchive holds two jobs, each with the hostile page at two URLs
// (the second job's changed) and a hostile failure.
func hostileArchive(beacon string) (*archivetest.Archive, [2]string) {
	jobs := [2]string{"0b6f8a5e-3c1d-4e2f-9a7b-1c2d3e4f5a6b", "7e1d2c3b-4a5f-4e6d-8c7b-9a0b1c2d3e4f"}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	a := &archivetest.Archive{}
	for i, job := range jobs {
		id := uuid.MustParse(job)
		at := t0.Add(time.Duration(i) * 24 * time.Hour)
		last := at.Add(time.Hour)
		a.AddJob(query.JobStatus{Crawl: archive.Crawl{CrawlID: id, Kind: "crawl", FirstDeliveryAt: &at, LastDeliveryAt: &last, PagesReceived: 2, Failures: 1},
			TopErrors: []archive.ErrorCount{{Error: "<script>window.__pwned='error'</script>", Pages: 1}}})
		md := browsertest.HostileMarkdown(beacon, i == 1)
		for _, u := range []string{browsertest.HostileURL, "https://example.org/hostile"} {
			a.AddPage(query.ArchivedPage{URL: u, CrawlID: id, Title: browsertest.HostileTitle, Success: true, StatusCode: 200,
				ReceivedAt: at, Markdown: md, HTML: browsertest.HostileHTML(beacon),
				Document: json.RawMessage(`{"markdown":"<script>window.__pwned='document'</script>","metadata":{"url":"javascript:alert(1)"}}`)})
		}
		a.AddFailure(id, query.FailedPage{URL: browsertest.HostileURL, StatusCode: 500, Reason: "failed", Error: browsertest.HostileError, ReceivedAt: at})
		a.AddFailure(id, query.FailedPage{URL: "https://example.org/cancelled", Reason: "cancelled", Error: "Crawl was cancelled", ReceivedAt: at})
		a.AddBlocked(id, browsertest.HostileURL+"/robots")
	}
	a.AddPage(query.ArchivedPage{URL: "https://example.org/hints", CrawlID: uuid.MustParse(jobs[1]), Success: true, StatusCode: 200, ReceivedAt: t0,
		Markdown: "hints", HTML: browsertest.HostileHints(beacon, "https://127.0.0.2:9", "http://hints.localhost:9")})
	return a, jobs
}

// assertInert fails unless the HTML document doc can run no script and
// reach no other host: no script-capable element, no event handler or
// style attribute, no URL attribute other than the pages' own paths
// (under base) and absolute http(s) or mailto links, iframes only
// sandboxed without allow-scripts, and their srcdoc naming no resource
// at all (assertNamesNoResource).
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
		if doc, ok := hasAttr(n, "srcdoc"); ok {
			assertNamesNoResource(t, doc)
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
	case strings.HasPrefix(v, "/v1/jobs/") && strings.Contains(v, "/export?format="):
		// A job's export, from the read API beside the pages.
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

// assertNamesNoResource fails unless the html document doc, parsed as a
// browser without script parses it (noscript's content as markup), holds
// no element a browser fetches for or that asks it to connect (link,
// meta, base, script, style, media, frames, forms, svg) and no attribute
// other than a few that hold no URL: nothing in it may make the browser
// reach a host, whatever the host and however it is asked.
func assertNamesNoResource(t *testing.T, doc string) {
	t.Helper()
	root, err := html.ParseWithOptions(strings.NewReader(doc), html.ParseOptionEnableScripting(false))
	if err != nil {
		t.Fatalf("parse srcdoc: %v", err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "html", "head", "body", "p", "div", "span", "table", "tbody", "tr", "td", "a", "br", "picture":
			default:
				t.Errorf("srcdoc holds <%s %v>", n.Data, n.Attr)
			}
			for _, a := range n.Attr {
				switch a.Key {
				case "title", "lang", "dir", "colspan", "rowspan", "open":
				default:
					t.Errorf("srcdoc holds <%s %s=%q>", n.Data, a.Key, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
}
