package crawlsim

import (
	"fmt"
	"html"
	"net/url"
	"strings"
)

// pageHTML is the html of a page of markdown md, as the crawl API returns it
// when a crawl asks for the html format: the page's paragraphs (its "# "
// heading a heading), after a navigation that links every page the job
// finds. So a page that a recrawl no longer finds (Recrawl.Gone) is no
// longer linked from any page, which is how a crawler loses it, and an
// added one is. The text is escaped: the markdown is drawn from plain words
// but the URLs come from -site.
func pageHTML(title, md string, links []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><title>%s</title></head>\n<body><nav>", html.EscapeString(title))
	for _, l := range links {
		text := l
		if u, err := url.Parse(l); err == nil && u.Path != "" {
			text = u.Path
		}
		fmt.Fprintf(&b, "<a href=\"%s\">%s</a> ", html.EscapeString(l), html.EscapeString(text))
	}
	b.WriteString("</nav>\n<main>\n")
	for _, para := range strings.Split(md, "\n\n") {
		if heading, ok := strings.CutPrefix(para, "# "); ok {
			fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(heading))
			continue
		}
		fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(para))
	}
	b.WriteString("</main></body></html>\n")
	return b.String()
}
