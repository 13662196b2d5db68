package web

import (
	"bytes"
	"html/template"
	"net/url"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// Crawled content is hostile: a page's title, markdown, html and URL were
// written by whoever runs the site crawled, and no script of theirs may ever
// run in a reader's browser. Three layers, each enough on its own for what
// it covers:
//
//   - markdown is rendered by goldmark without its unsafe option (raw HTML
//     in the markdown becomes a comment, dangerous link targets such as
//     javascript: are dropped), then bluemonday's UGC policy, tightened to
//     absolute http(s) and mailto links, removes whatever else could carry
//     script or style;
//   - html is only ever shown as escaped text, or as the srcdoc of an
//     iframe sandboxed without allow-scripts (an opaque origin that runs no
//     script and submits no form);
//   - every response carries a Content-Security-Policy with script-src
//     'none' (server.go), so a script that slipped past both would still be
//     blocked by the browser.
//
// Everything else (titles, URLs, snippets, errors) goes through
// html/template's contextual escaping as plain strings.

// maxRenderedMarkdown bounds the markdown rendered as HTML; past it the page
// shows the text escaped in a <pre>, so one huge page cannot make the
// renderer and sanitiser the cost of a request.
const maxRenderedMarkdown = 2 << 20

// renderer turns crawled markdown into HTML that is safe to embed, and
// crawled html into a document that is safe to show in the sandbox.
type renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
	// sandbox is the policy of the html shown in the sandboxed iframe.
	sandbox *bluemonday.Policy
}

func newRenderer() *renderer {
	p := bluemonday.UGCPolicy()
	p.AllowURLSchemes("http", "https", "mailto")
	p.AllowRelativeURLs(false)
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return &renderer{
		// No html.WithUnsafe: raw HTML is omitted and dangerous URLs dropped.
		md:      goldmark.New(goldmark.WithExtensions(extension.GFM)),
		policy:  p,
		sandbox: sandboxPolicy(),
	}
}

// The sandbox and the Content-Security-Policy keep an archived page's
// html from running script, loading resources, submitting or navigating,
// but not everything a document may ask of a browser passes through them:
// Chromium honours <link rel=preconnect> (a TCP connection and a TLS hello
// to the crawled host) and rel=dns-prefetch (DNS queries) in a sandboxed
// srcdoc, and no CSP directive governs either. Rather than list what a
// browser might fetch (resource hints, meta refresh, <base>, ping, srcset,
// the next feature), the html shown in the sandbox keeps only elements of
// text and structure and attributes that name no resource: no element or
// attribute of it holds a URL, so nothing in it can make the browser reach
// any host. Head elements (link, meta, base, title, style, script) are
// dropped, noscript with its content (which a document without script
// would parse as markup), and so are forms, frames, media and embedded
// content; links keep their text. The page as archived is in the source
// view and the read API.

// sandboxElements are the elements the sandboxed html keeps: text and its
// structure.
var sandboxElements = []string{
	"address", "article", "aside", "footer", "header", "h1", "h2", "h3", "h4", "h5", "h6", "hgroup", "main", "nav", "section",
	"blockquote", "dd", "div", "dl", "dt", "figcaption", "figure", "hr", "li", "ol", "p", "pre", "ul", "center",
	"a", "abbr", "b", "bdi", "bdo", "br", "cite", "code", "data", "dfn", "em", "i", "kbd", "mark", "q", "rp", "rt", "ruby",
	"s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr", "del", "ins",
	"caption", "col", "colgroup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
	"details", "summary", "fieldset", "legend", "label",
}

// sandboxPolicy keeps sandboxElements with attributes that hold no URL.
func sandboxPolicy() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements(sandboxElements...)
	p.AllowAttrs("title", "lang", "dir", "colspan", "rowspan", "open").Globally()
	p.AllowElements("a") // kept for its text; without href it is dropped, its text kept
	return p
}

// sandboxed returns crawled html as the document the sandboxed iframe
// shows: sandboxPolicy's elements and attributes only.
func (r *renderer) sandboxed(src string) string {
	return "<!doctype html>" + r.sandbox.Sanitize(src)
}

// markdown renders crawled markdown as sanitised HTML. ok is false when the
// markdown is too large or does not render; the caller then shows it as
// escaped text.
func (r *renderer) markdown(src string) (out template.HTML, ok bool) {
	if len(src) > maxRenderedMarkdown {
		return "", false
	}
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(src), &buf); err != nil {
		return "", false
	}
	// The policy's output is the only HTML of crawled origin the pages
	// trust as HTML.
	return template.HTML(r.policy.SanitizeBytes(buf.Bytes())), true
}

// linkable reports whether a crawled URL may be rendered as a link: an
// absolute http or https URL with a host. Anything else (javascript:, data:,
// vbscript:, scheme-relative, relative) is shown as text only.
func linkable(raw string) bool {
	if strings.ContainsAny(raw, "\x00\t\r\n") {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return false
	}
	return u.Scheme == "http" || u.Scheme == "https"
}
