package textdiff_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/textdiff"
)

// TestUnified: the unified diff of named cases, as `diff -u` writes it.
func TestUnified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"identical", "a\nb\nc\n", "a\nb\nc\n", ""},
		{"both empty", "", "", ""},
		{"CRLF against LF is no change", "a\r\nb\r\n", "a\nb\n", ""},
		{"missing final newline is no change", "a\nb", "a\nb\n", ""},
		{"from empty", "", "a\nb\n", "--- old\n+++ new\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty", "a\nb\n", "", "--- old\n+++ new\n@@ -1,2 +0,0 @@\n-a\n-b\n"},
		{"insert", "a\nb\nc\nd\n", "a\nb\nX\nc\nd\n", "--- old\n+++ new\n@@ -1,4 +1,5 @@\n a\n b\n+X\n c\n d\n"},
		{"delete", "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nf\ng\nh\n", "--- old\n+++ new\n@@ -2,7 +2,6 @@\n b\n c\n d\n-e\n f\n g\n h\n"},
		{"replace one line", "# Pricing\nPro: $10\n", "# Pricing\nPro: $12\n", "--- old\n+++ new\n@@ -1,2 +1,2 @@\n # Pricing\n-Pro: $10\n+Pro: $12\n"},
		{"reorder", "one\ntwo\nthree\n", "three\none\ntwo\n", "--- old\n+++ new\n@@ -1,3 +1,3 @@\n+three\n one\n two\n-three\n"},
		{"CRLF line changed", "a\r\nb\r\n", "a\r\nc\r\n", "--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"},
		{"two hunks", lines(1, 20), strings.Replace(strings.Replace(lines(1, 20), "L2\n", "X2\n", 1), "L18\n", "X18\n", 1),
			"--- old\n+++ new\n@@ -1,5 +1,5 @@\n L1\n-L2\n+X2\n L3\n L4\n L5\n@@ -15,6 +15,6 @@\n L15\n L16\n L17\n-L18\n+X18\n L19\n L20\n"},
		{"changes 6 lines apart share a hunk", lines(1, 10), strings.Replace(strings.Replace(lines(1, 10), "L2\n", "X2\n", 1), "L9\n", "X9\n", 1),
			"--- old\n+++ new\n@@ -1,10 +1,10 @@\n L1\n-L2\n+X2\n L3\n L4\n L5\n L6\n L7\n L8\n-L9\n+X9\n L10\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := textdiff.Diff(tc.old, tc.new)
			if got := r.Unified("old", "new"); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if r.Coarse {
				t.Error("a small diff is coarse")
			}
			if r.Changed() != (tc.want != "") {
				t.Errorf("Changed() = %v", r.Changed())
			}
		})
	}
}

func lines(from, to int) string {
	var sb strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&sb, "L%d\n", i)
	}
	return sb.String()
}

// TestDiffMinimalAndCorrect: on random texts of few distinct lines, the
// edits rebuild both texts and are as few as a longest common subsequence
// allows (the Myers path, exact below its cap).
func TestDiffMinimalAndCorrect(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		a, b := randomLines(rng), randomLines(rng)
		r := textdiff.Diff(strings.Join(a, "\n"), strings.Join(b, "\n"))
		checkRebuilds(t, r, a, b)
		var changes int
		for _, e := range r.Edits {
			if e.Op != textdiff.Equal {
				changes++
			}
		}
		if want := len(a) + len(b) - 2*lcs(a, b); changes != want {
			t.Fatalf("case %d: %d edits, the shortest script has %d\na=%q\nb=%q", i, changes, want, a, b)
		}
	}
}

func randomLines(rng *rand.Rand) []string {
	out := make([]string, rng.IntN(12))
	for i := range out {
		out[i] = string(rune('a' + rng.IntN(4)))
	}
	return out
}

func lcs(a, b []string) int {
	t := make([][]int, len(a)+1)
	for i := range t {
		t[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	return t[0][0]
}

// checkRebuilds: the old text is the edits' equal and deleted lines, the
// new text their equal and inserted lines, in order.
func checkRebuilds(t *testing.T, r textdiff.Result, a, b []string) {
	t.Helper()
	var gotA, gotB []string
	for _, e := range r.Edits {
		if e.Op != textdiff.Insert {
			gotA = append(gotA, e.Line)
		}
		if e.Op != textdiff.Delete {
			gotB = append(gotB, e.Line)
		}
	}
	if strings.Join(gotA, "\n") != strings.Join(a, "\n") || len(gotA) != len(a) {
		t.Fatalf("the edits do not rebuild the old text (%d lines of %d)", len(gotA), len(a))
	}
	if strings.Join(gotB, "\n") != strings.Join(b, "\n") || len(gotB) != len(b) {
		t.Fatalf("the edits do not rebuild the new text (%d lines of %d)", len(gotB), len(b))
	}
}

// TestLargePage: a 5 MB page against a copy edited in a few places keeps
// an exact, line-by-line diff (unique lines anchor it); against a copy
// with more scattered edits than the cap allows between two anchors, the
// diff stays correct, shows the changed block whole and says it is coarse.
func TestLargePage(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	for i := 0; sb.Len() < 5<<20; i++ {
		fmt.Fprintf(&sb, "line %d of a long page, with some words to make it wide enough\n", i)
	}
	page := sb.String()
	a := textdiff.Lines(page)

	t.Run("few edits", func(t *testing.T) {
		t.Parallel()
		b := append([]string(nil), a...)
		b[10] = "edited near the top"
		b[len(b)/2] = "edited in the middle"
		b = append(b[:len(b)-5], b[len(b)-4:]...) // one line removed near the end
		r := textdiff.Diff(page, strings.Join(b, "\n"))
		checkRebuilds(t, r, a, b)
		if r.Coarse {
			t.Error("three edits gave a coarse diff")
		}
		u := r.Unified("old", "new")
		if got := strings.Count(u, "\n@@ "); got != 3 {
			t.Errorf("%d hunks, want 3:\n%.2000s", got, u)
		}
		if !strings.Contains(u, "\n-line 10 of a long page, with some words to make it wide enough\n+edited near the top\n") {
			t.Errorf("the first edit is missing:\n%.2000s", u)
		}
	})

	t.Run("more edits than the cap, spread out", func(t *testing.T) {
		t.Parallel()
		// One line in 40 edited: thousands of edits in all, past MaxEdits,
		// but few between the unchanged lines that anchor them, so the
		// diff is still exact: one hunk of one change per edit.
		b := append([]string(nil), a...)
		edits := 0
		for i := 20; i < len(b); i += 40 {
			b[i] = fmt.Sprintf("edited %d", i)
			edits++
		}
		if edits <= textdiff.MaxEdits {
			t.Fatalf("only %d edits: the case needs more than MaxEdits", edits)
		}
		r := textdiff.Diff(page, strings.Join(b, "\n"))
		checkRebuilds(t, r, a, b)
		if r.Coarse {
			t.Error("edits spread out gave a coarse diff")
		}
		u := r.Unified("old", "new")
		if got := strings.Count(u, "\n@@ "); got != edits {
			t.Errorf("%d hunks, want %d", got, edits)
		}
		if got := strings.Count(u, "\n-"); got != edits {
			t.Errorf("%d lines removed, want %d", got, edits)
		}
	})

	t.Run("past the cap", func(t *testing.T) {
		t.Parallel()
		// Every line changed but every 3000th, each change differing in
		// both texts: the gaps between the kept lines need 6000 edits each,
		// past MaxEdits, so they are shown whole.
		b := append([]string(nil), a...)
		for i := range b {
			if i%3000 != 0 {
				b[i] = fmt.Sprintf("rewritten %d", i)
			}
		}
		r := textdiff.Diff(page, strings.Join(b, "\n"))
		checkRebuilds(t, r, a, b)
		if !r.Coarse {
			t.Fatal("a diff past the cap is not marked coarse")
		}
		u := r.Unified("old", "new")
		if !strings.HasPrefix(u, textdiff.CoarseNote+"\n--- old\n+++ new\n@@ ") {
			t.Errorf("the coarse diff does not start with its note and headers:\n%.500s", u)
		}
		// A block shown whole: removed lines 1..2999 then added ones.
		if !strings.Contains(u, "-line 2999 of a long page, with some words to make it wide enough\n+rewritten 1\n") {
			t.Errorf("the first gap is not removed then added whole:\n%.500s", u)
		}
	})
}

// TestExactBounded: past textdiff.MaxEdits, Exact gives a coarse diff that still
// turns the old text into the new, keeping line endings and the missing
// final newline.
func TestExactBounded(t *testing.T) {
	t.Parallel()
	var a, b strings.Builder
	for i := 0; i < textdiff.MaxEdits; i++ {
		fmt.Fprintf(&a, "old %d\r\n", i)
		fmt.Fprintf(&b, "new %d\n", i)
	}
	old, cur := "same\n"+a.String()+"end", "same\n"+b.String()+"end"
	r := textdiff.Exact(old, cur)
	if !r.Coarse {
		t.Fatal("not coarse past textdiff.MaxEdits")
	}
	var gotOld, gotNew strings.Builder
	for _, e := range r.Edits {
		line := e.Line
		if !e.NoNewline {
			line += "\n"
		}
		if e.Op != textdiff.Insert {
			gotOld.WriteString(line)
		}
		if e.Op != textdiff.Delete {
			gotNew.WriteString(line)
		}
	}
	if gotOld.String() != old || gotNew.String() != cur {
		t.Error("the coarse edits do not give back both texts")
	}
	if r.Edits[0] != (textdiff.Edit{Op: textdiff.Equal, Line: "same"}) || r.Edits[len(r.Edits)-1] != (textdiff.Edit{Op: textdiff.Equal, Line: "end", NoNewline: true}) {
		t.Errorf("common prefix and suffix not kept: %v … %v", r.Edits[0], r.Edits[len(r.Edits)-1])
	}
}
