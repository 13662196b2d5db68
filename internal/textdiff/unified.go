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
	for i := 0; i < len(r.Edits); {
		if r.Edits[i].Op == Equal {
			i++
			continue
		}
		start := max(0, i-Context)
		// The hunk runs to Context lines past its last change, taking in
		// the next change when fewer than 2·Context equal lines part them.
		end, equal := i, 0
		for j := i; j < len(r.Edits) && equal <= 2*Context; j++ {
			if r.Edits[j].Op == Equal {
				equal++
				continue
			}
			equal, end = 0, j+1
		}
		end = min(len(r.Edits), end+Context)
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", span(aAt[start], aAt[end]-aAt[start]), span(bAt[start], bAt[end]-bAt[start]))
		for _, e := range r.Edits[start:end] {
			sb.WriteByte(byte(e.Op))
			sb.WriteString(e.Line)
			sb.WriteByte('\n')
		}
		i = end
	}
	return sb.String()
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
