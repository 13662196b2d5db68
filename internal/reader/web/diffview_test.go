package web

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/textdiff"
)

func numberedLines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// A diff's hunks carry `diff -u`'s headers and each line its numbers in the
// old and the new text; the words that changed in a replaced line are
// marked, on both sides.
func TestDiffView(t *testing.T) {
	t.Parallel()
	old := numberedLines(1, 20)
	edited := strings.Replace(strings.Replace(old, "line 2\n", "line two\n", 1), "line 18\n", "line 18\nadded\n", 1)
	d := textdiff.Diff(old, edited)
	hs := diffView(d.Edits, 3)
	var headers []string
	for _, h := range hs {
		headers = append(headers, h.Header)
	}
	if want := []string{"@@ -1,5 +1,5 @@", "@@ -16,5 +16,6 @@"}; !reflect.DeepEqual(headers, want) {
		t.Fatalf("headers %q, want %q", headers, want)
	}
	for _, h := range headers {
		if !strings.Contains(d.Unified("a", "b"), h+"\n") {
			t.Errorf("header %q is not textdiff's unified diff's:\n%s", h, d.Unified("a", "b"))
		}
	}
	del, add := hs[0].Lines[1], hs[0].Lines[2]
	if del.Old != 2 || del.New != 0 || add.Old != 0 || add.New != 2 {
		t.Errorf("numbers: removed %d/%d, added %d/%d", del.Old, del.New, add.Old, add.New)
	}
	if want := []span{{"line ", false}, {"2", true}}; !reflect.DeepEqual(del.Parts, want) {
		t.Errorf("removed line %v, want %v", del.Parts, want)
	}
	if want := []span{{"line ", false}, {"two", true}}; !reflect.DeepEqual(add.Parts, want) {
		t.Errorf("added line %v, want %v", add.Parts, want)
	}
	// An added line with no removed one to pair with is shown whole.
	if l := hs[1].Lines[3]; l.Op != textdiff.Insert || l.New != 19 || !reflect.DeepEqual(l.Parts, []span{{"added", false}}) {
		t.Errorf("added line %+v", l)
	}
	// From nothing: every line added, the old side empty.
	if hs := diffView(textdiff.Diff("", "a\nb\n").Edits, 3); len(hs) != 1 || hs[0].Header != "@@ -0,0 +1,2 @@" {
		t.Errorf("from nothing: %+v", hs)
	}
}
