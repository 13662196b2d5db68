package clip_test

import (
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/clip"
)

// TestCut: a crawled text is cut to its bound on a rune boundary and says
// so; a text within it is kept whole.
func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		n              int
	}{
		{"within", "abc", "abc", 3},
		{"cut", "abcdef", "abc…", 3},
		{"inside a rune", "aé" + "b", "a…", 2},
		{"empty bound", "é", "…", 0},
	} {
		if got := clip.Cut(tc.in, tc.n); got != tc.want {
			t.Errorf("%s: Cut(%q, %d) = %q, want %q", tc.name, tc.in, tc.n, got, tc.want)
		}
	}
	if got := clip.Cut(strings.Repeat("é", clip.MaxField), clip.MaxField); len(got) > clip.MaxField+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("a long text cut to %d bytes", len(got))
	}
}

// TestPrefix: the cut without an ellipsis, as the web pages show a
// source, says whether it cut.
func TestPrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		n        int
		cut      bool
	}{
		{"abc", "abc", 3, false},
		{"abcdef", "abc", 3, true},
		{"aéb", "a", 2, true}, // é is two bytes: not cut in half
		{"", "", 0, false},
	} {
		if got, cut := clip.Prefix(tc.in, tc.n); got != tc.want || cut != tc.cut {
			t.Errorf("Prefix(%q, %d) = %q, %v; want %q, %v", tc.in, tc.n, got, cut, tc.want, tc.cut)
		}
	}
}
