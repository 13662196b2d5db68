package textdiff

import (
	"fmt"
	"strings"
)

// Context is the number of unchanged lines a unified diff shows around each
// change, as `diff -u`.
const Context = 3

// CoarseNote is the first line of a unified diff whose Result is Coarse.
// It starts with '#', which patch and git apply skip as text before the
// first file header.
const CoarseNote = "# coarse diff: past its limits, some changed blocks are shown whole (removed, then added) rather than line by line"

// Unified writes r as a unified diff of fromName → toName, the header lines
// "--- fromName" and "+++ toName", then hunks with Context lines of context.
// It returns "" when the texts are equal. Lines are written as they are:
// a caller showing them on a terminal must make them safe first.
func (r Result) Unified(fromName, toName string) string {
	if !r.Changed() {
		return ""
	}
	var sb strings.Builder
	if r.Coarse {
		sb.WriteString(CoarseNote + "\n")
	}
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", fromName, toName)
	for _, h := range r.Hunks() {
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", span(h.OldBefore, h.OldLines), span(h.NewBefore, h.NewLines))
		for _, e := range h.Edits {
			sb.WriteByte(byte(e.Op))
			sb.WriteString(e.Line)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// Hunk is one hunk of a unified diff: changes with Context equal lines
// around them.
type Hunk struct {
	// OldBefore and NewBefore count each text's lines before the hunk;
	// OldLines and NewLines count the lines of each text it spans.
	OldBefore, OldLines, NewBefore, NewLines int
	// Edits are the hunk's lines, a sub-slice of Result.Edits.
	Edits []Edit
}

// Hunks groups r's changes into hunks as `diff -u` does: Context equal
// lines around each change, two changes parted by at most 2·Context equal
// lines in one hunk. None when the texts are equal.
func (r Result) Hunks() []Hunk {
	// aAt[i], bAt[i]: old and new lines before edit i.
	aAt, bAt := make([]int, len(r.Edits)+1), make([]int, len(r.Edits)+1)
	for i, e := range r.Edits {
		aAt[i+1], bAt[i+1] = aAt[i], bAt[i]
		if e.Op != Insert {
			aAt[i+1]++
		}
		if e.Op != Delete {
			bAt[i+1]++
		}
	}
	var out []Hunk
	for i := 0; i < len(r.Edits); {
		if r.Edits[i].Op == Equal {
			i++
			continue
		}
		start := max(0, i-Context)
		// The hunk runs to Context lines past its last change, taking in
		// the next change when at most 2·Context equal lines part them.
		end, equal := i, 0
		for j := i; j < len(r.Edits) && equal <= 2*Context; j++ {
			if r.Edits[j].Op == Equal {
				equal++
				continue
			}
			equal, end = 0, j+1
		}
		end = min(len(r.Edits), end+Context)
		out = append(out, Hunk{OldBefore: aAt[start], OldLines: aAt[end] - aAt[start],
			NewBefore: bAt[start], NewLines: bAt[end] - bAt[start], Edits: r.Edits[start:end]})
		i = end
	}
	return out
}

// span is a hunk's range as `diff -u` writes it: the first line (1-based)
// and the count; an empty range names the line before it.
func span(before, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, n)
}
