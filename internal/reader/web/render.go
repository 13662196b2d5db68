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

// renderer turns crawled markdown into HTML that is safe to embed.
type renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
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
		md:     goldmark.New(goldmark.WithExtensions(extension.GFM)),
		policy: p,
	}
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
