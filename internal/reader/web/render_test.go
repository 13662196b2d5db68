package web

import (
	"strings"
	"testing"
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
			out, ok := r.markdown(tc.md)
			if !ok {
				t.Fatal("not rendered")
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
	if _, ok := newRenderer().markdown(strings.Repeat("a", maxRenderedMarkdown+1)); ok {
		t.Error("rendered past the limit")
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"aé", 2, "a", true}, // é is two bytes: not cut in half
		{"", 0, "", false},
	} {
		if got, c := cut(tc.s, tc.n); got != tc.want || c != tc.cut {
			t.Errorf("cut(%q, %d) = %q, %v; want %q, %v", tc.s, tc.n, got, c, tc.want, tc.cut)
		}
	}
}
