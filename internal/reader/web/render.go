package web

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// Crawled content is hostile: a page's title, markdown, html and URL were
// written by whoever runs the site crawled, and no script of theirs may ever
// run in a reader's browser. Three layers, each enough on its own for what
// it covers:
//
//   - markdown is rendered by goldmark without its unsafe option (raw HTML
//     in the markdown becomes a comment, dangerous link targets such as
//     javascript: are dropped), within a budget (budget.go), then
//     bluemonday's UGC policy, tightened to absolute http(s) and mailto
//     links, removes whatever else could carry script or style;
//   - html is only ever shown as escaped text, or as the srcdoc of an
//     iframe sandboxed without allow-scripts (an opaque origin that runs no
//     script and submits no form);
//   - every response carries a Content-Security-Policy with script-src
//     'none' (server.go), so a script that slipped past both would still be
//     blocked by the browser.
//
// Everything else (titles, URLs, snippets, errors) goes through
// html/template's contextual escaping as plain strings.

// What a page view may spend on rendering markdown (budget.go): past
// any of these the page shows the markdown as escaped text.
const (
	// maxRenderedMarkdown bounds the markdown rendered as HTML: the size
	// of the sources a page shows (maxShownSource).
	maxRenderedMarkdown = 1 << 20
	// renderPool is how many renders run at once, whatever the number of
	// readers: the rest wait for a slot within their deadline.
	renderPool = 2
	// renderTimeout is the deadline of one render, within the request's.
	renderTimeout = 2 * time.Second
	// stepsPerByte and baseSteps are the budget of a render of n bytes:
	// baseSteps + stepsPerByte*n. The repository's documents spend about
	// five steps a byte, the hostile shapes steps growing with the square
	// of their size (TestMarkdownBudget).
	stepsPerByte = 32
	baseSteps    = 1 << 20
)

// renderer turns crawled markdown into HTML that is safe to embed, and
// crawled html into a document that is safe to show in the sandbox.
type renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
	// sandbox is the policy of the html shown in the sandboxed iframe.
	sandbox *bluemonday.Policy
	// renders holds a token per render in progress (renderPool).
	renders chan struct{}
	// steps is the budget of a render of n bytes of markdown.
	steps func(n int) int64
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
		md:      goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithParserOptions(meterOption())),
		policy:  p,
		sandbox: sandboxPolicy(),
		renders: make(chan struct{}, renderPool),
		steps:   func(n int) int64 { return baseSteps + stepsPerByte*int64(n) },
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

// errTooLarge is markdown past maxRenderedMarkdown.
var errTooLarge = errors.New("larger than the pages render")

// markdown renders crawled markdown as sanitised HTML, within a slot of
// the pool, its budget and its deadline; it stops when ctx is done. On an
// error (errTooLarge, errBudget, the context's) the caller shows the
// markdown as escaped text.
func (r *renderer) markdown(ctx context.Context, src string) (template.HTML, error) {
	if len(src) > maxRenderedMarkdown {
		return "", errTooLarge
	}
	ctx, cancel := context.WithTimeout(ctx, renderTimeout)
	defer cancel()
	select {
	case r.renders <- struct{}{}:
		defer func() { <-r.renders }()
	case <-ctx.Done():
		return "", ctx.Err()
	}
	out, err := r.convert([]byte(src), &renderBudget{ctx: ctx, left: r.steps(len(src))})
	if err != nil {
		return "", err
	}
	// The policy's output is the only HTML of crawled origin the pages
	// trust as HTML.
	return template.HTML(r.policy.SanitizeBytes(out)), nil
}

// convert is goldmark's Convert with the budget charged as it parses
// (budget.go): the budget's error when it stops the render.
func (r *renderer) convert(src []byte, b *renderBudget) (out []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			stop, ok := v.(stopRender)
			if !ok {
				panic(v)
			}
			out, err = nil, stop.err
		}
	}()
	pc := parser.NewContext()
	pc.Set(budgetKey, b)
	doc := r.md.Parser().Parse(meteredReader{Reader: text.NewReader(src), budget: b}, parser.WithContext(pc))
	if err := b.ctx.Err(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := r.md.Renderer().Render(&buf, src, doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
