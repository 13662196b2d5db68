package crawlsim

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHTML: with Options.HTML every scraped page's Document, as delivered
// and as the status API serves it, holds html with the page's text and a
// link to every page the job finds: a recrawl's pages link its added page
// and no longer link its gone one. Without it there is no html.
func TestHTML(t *testing.T) {
	t.Parallel()
	const earlierID = "6a1c7e4f-3d2e-4b9f-8c8b-2e3f4a5b6c7d"
	o := Options{ID: earlierID, Pages: 5, PageBytes: 400, Seed: 11, HTML: true}
	earlier, err := NewCrawl(o)
	if err != nil {
		t.Fatal(err)
	}
	o.ID = ""
	o.Recrawl = &Recrawl{Of: earlierID, Edited: 1, NotFound: 1, Gone: 1, Added: 1}
	later, err := NewCrawl(o)
	if err != nil {
		t.Fatal(err)
	}
	link := func(u string) string { return `<a href="` + u + `">` }
	for _, c := range []*Crawl{earlier, later} {
		for _, p := range c.Pages {
			delivered := deliveredDocument(t, p)
			var served wireDocument
			if err := json.Unmarshal(p.doc, &served); err != nil {
				t.Fatal(err)
			}
			if delivered.HTML == "" || served.HTML != delivered.HTML {
				t.Fatalf("%s: html %q delivered, %q served", p.URL, delivered.HTML, served.HTML)
			}
			for _, para := range strings.Split(strings.TrimPrefix(delivered.Markdown, "# "), "\n\n") {
				if !strings.Contains(delivered.HTML, ">"+para+"</") {
					t.Errorf("%s: html lacks the paragraph %q:\n%s", p.URL, para, delivered.HTML)
				}
			}
			for _, q := range c.Pages {
				if !strings.Contains(delivered.HTML, link(q.URL)) {
					t.Errorf("%s does not link %s, a page of its job", p.URL, q.URL)
				}
			}
		}
	}
	gone, added := earlier.Pages[4].URL, later.Pages[4].URL
	if added != "https://example.com/added/0" {
		t.Fatalf("the recrawl's last page is %s, want the added one", added)
	}
	for _, p := range later.Pages {
		if h := deliveredDocument(t, p).HTML; strings.Contains(h, link(gone)) {
			t.Errorf("%s still links the gone page %s", p.URL, gone)
		}
	}
	plain, err := NewCrawl(Options{Pages: 2, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	if h := deliveredDocument(t, plain.Pages[0]).HTML; h != "" {
		t.Errorf("html without Options.HTML: %q", h)
	}
}

// TestPageHTMLEscapes: the text and the URLs (from -site) are escaped.
func TestPageHTMLEscapes(t *testing.T) {
	t.Parallel()
	h := pageHTML(`<b>"t"</b>`, "# <h>\n\n<script>x</script> & y", []string{`https://e.com/"><script>`})
	for _, raw := range []string{"<script>", "<b>", "<h>", `"><script`, " & "} {
		if strings.Contains(h, raw) {
			t.Errorf("%q unescaped in:\n%s", raw, h)
		}
	}
	if !strings.Contains(h, "<p>&lt;script&gt;x&lt;/script&gt; &amp; y</p>") {
		t.Errorf("the paragraph is not kept as text:\n%s", h)
	}
}

func deliveredDocument(t *testing.T, p *Page) wireDocument {
	t.Helper()
	var ev struct {
		Data []wireDocument `json:"data"`
	}
	if err := json.Unmarshal(p.Body, &ev); err != nil || len(ev.Data) != 1 {
		t.Fatalf("%s: delivery %s: %v", p.URL, p.Body, err)
	}
	return ev.Data[0]
}
