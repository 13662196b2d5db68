package web

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
)

func TestLinkable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://example.org/a?b=c#d", true},
		{"http://example.org", true},
		{"HTTPS://EXAMPLE.ORG/", true},
		{"javascript:alert(1)", false},
		{"JavaScript:alert(1)//https://example.org/", false},
		{" javascript:alert(1)", false},
		{"java\tscript:alert(1)", false},
		{"data:text/html,<script>alert(1)</script>", false},
		{"vbscript:msgbox(1)", false},
		{"//evil.example/", false},
		{"/relative", false},
		{"https:evil", false},
		{"ftp://example.org/", false},
		{"", false},
	} {
		if got := linkable(tc.url); got != tc.want {
			t.Errorf("linkable(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}

// Each case is crawled markdown carrying script; the rendered HTML must
// keep what is harmless (want) and lose what could run or load (never).
func TestMarkdownIsSanitised(t *testing.T) {
	t.Parallel()
	r := newRenderer()
	for _, tc := range []struct {
		name  string
		md    string
		want  []string
		never []string
	}{
		{"raw script", "a <script>alert(1)</script> b", []string{"a", "b"}, []string{"<script", "alert(1)</script>"}},
		{"script block", "<script>\nalert(1)\n</script>", nil, []string{"<script"}},
		{"onerror", `<img src=x onerror="alert(1)">`, nil, []string{"onerror", "<img"}},
		{"svg onload", `<svg onload="alert(1)"><circle/></svg>`, nil, []string{"<svg", "onload"}},
		{"iframe srcdoc", `<iframe srcdoc="<script>alert(1)</script>"></iframe>`, nil, []string{"<iframe", "srcdoc"}},
		{"javascript link", "[x](javascript:alert(1))", []string{">x<"}, []string{"javascript:", "href"}},
		{"mixed case scheme", "[x](JaVaScRiPt:alert(1))", nil, []string{"href", "JaVaScRiPt"}},
		{"entity scheme", "[x](&#106;avascript:alert(1))", nil, []string{"href"}},
		{"tab in scheme", "[x](java\tscript:alert(1))", nil, []string{"href"}},
		{"data link", "[x](data:text/html;base64,PHNjcmlwdD4=)", nil, []string{"href", "data:"}},
		{"data svg image", "![x](data:image/svg+xml;base64,PHN2Zz4=)", nil, []string{"data:", "src="}},
		{"vbscript", "[x](vbscript:msgbox(1))", nil, []string{"href"}},
		{"autolink", "<javascript:alert(1)>", nil, []string{"href"}},
		{"raw anchor", `<a href="javascript:alert(1)">x</a>`, nil, []string{"href"}},
		{"style element", "<style>*{background:url(https://evil.example/)}</style>", nil, []string{"<style", "url("}},
		{"style attribute", `<p style="background:url(https://evil.example/)">x</p>`, nil, []string{"style="}},
		{"relative link", "[x](/ui/jobs)", nil, []string{"href"}},
		{"scheme-relative link", "[x](//evil.example/)", nil, []string{"href"}},
		{"title attribute breakout", `[x](https://example.org/ "\" onmouseover=\"alert(1)")`, []string{`href="https://example.org/"`}, []string{" onmouseover="}},
		{"https link", "[fine](https://example.org/a)", []string{`href="https://example.org/a"`, `rel="nofollow noreferrer noopener"`, `target="_blank"`}, nil},
		{"table", "| a | b |\n|---|---|\n| 1 | 2 |", []string{"<table>", "<td>1</td>"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := r.markdown(context.Background(), tc.md)
			if err != nil {
				t.Fatalf("not rendered: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%q lacks %q", out, w)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(string(out), n) {
					t.Errorf("%q has %q", out, n)
				}
			}
		})
	}
}

// Past maxRenderedMarkdown the page shows the markdown as text.
func TestMarkdownTooLarge(t *testing.T) {
	t.Parallel()
	if _, err := newRenderer().markdown(context.Background(), strings.Repeat("a", maxRenderedMarkdown+1)); !errors.Is(err, errTooLarge) {
		t.Errorf("rendered past the limit: %v", err)
	}
}

// spent renders md with an unlimited budget and returns the steps it
// spent.
func spent(t *testing.T, r *renderer, md string) int64 {
	t.Helper()
	b := &renderBudget{ctx: context.Background(), left: math.MaxInt64}
	if _, err := r.convert([]byte(md), b); err != nil {
		t.Fatal(err)
	}
	return math.MaxInt64 - b.left
}

// hostileShapes are markdown on which goldmark spends time quadratic in
// their size, each of n bytes.
func hostileShapes(n int) map[string]string {
	return map[string]string{
		"unclosed links":       strings.Repeat("[a](", n/4),
		"nested quotes":        strings.Repeat(">", n),
		"spaced nested quotes": strings.Repeat("> ", n/2),
		"unmatched emphasis":   strings.Repeat("*a_", n/3),
		"open brackets":        strings.Repeat("[", n),
	}
}

// Markdown as people write it (the repository's documents, the hostile
// corpus) spends a few steps a byte; the hostile shapes spend steps
// growing with the square of their size, so that a budget linear in the
// size renders the first and stops the second. The budget is counted, not
// timed: these assertions hold on any machine.
func TestMarkdownBudget(t *testing.T) {
	t.Parallel()
	r := newRenderer()
	docs, err := filepath.Glob("../../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no documents: %v", err)
	}
	var all strings.Builder
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for name, md := range map[string]string{
		"docs":    all.String(),
		"hostile": browsertest.HostileMarkdown("https://beacon.example", false),
		// A page as one line (minified), dense with links, code and asides.
		"one long line": strings.Repeat("[a *link*](https://example.org/page) and `code` (an aside) <https://example.org/> ", 2500),
	} {
		if per := float64(spent(t, r, md)) / float64(len(md)); per > stepsPerByte/4 {
			t.Errorf("%s: %.1f steps a byte, more than a quarter of the budget's %d", name, per, stepsPerByte)
		}
		if _, err := r.markdown(context.Background(), md); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, md := range hostileShapes(4 << 10) {
		small, double := spent(t, r, md), spent(t, r, md+md)
		if double < 3*small {
			t.Errorf("%s: %d steps for 4 KiB, %d for 8 KiB: the meter does not see the quadratic work", name, small, double)
		}
	}
	for name, md := range hostileShapes(128 << 10) {
		if _, err := r.markdown(context.Background(), md); !errors.Is(err, errBudget) {
			t.Errorf("%s: %v, want errBudget", name, err)
		}
	}
}

// cancelAfter is a context whose Err is context.Canceled from its nth
// look on, counting the looks: a reader who leaves mid-render.
type cancelAfter struct {
	context.Context
	n, looks int
}

func (c *cancelAfter) Err() error {
	if c.looks++; c.looks >= c.n {
		return context.Canceled
	}
	return nil
}

// A render stops at the first look at its context after the request is
// cancelled, whatever budget is left: no core stays busy for a reader
// who left.
func TestMarkdownStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	r := newRenderer()
	for name, md := range hostileShapes(1 << 20) {
		ctx := &cancelAfter{Context: context.Background(), n: 3}
		_, err := r.convert([]byte(md), &renderBudget{ctx: ctx, left: math.MaxInt64})
		if !errors.Is(err, context.Canceled) || ctx.looks != ctx.n {
			t.Errorf("%s: %v after %d looks at the context, want context.Canceled at look %d", name, err, ctx.looks, ctx.n)
		}
	}
}

// With every slot of the pool taken, a render waits for one no longer
// than its request: the markdown is shown as text.
func TestMarkdownPoolFull(t *testing.T) {
	t.Parallel()
	r := newRenderer()
	for range renderPool {
		r.renders <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.markdown(ctx, "# a title"); !errors.Is(err, context.Canceled) {
		t.Errorf("rendered without a slot: %v", err)
	}
	<-r.renders
	if _, err := r.markdown(context.Background(), "# a title"); err != nil {
		t.Errorf("a free slot: %v", err)
	}
}
