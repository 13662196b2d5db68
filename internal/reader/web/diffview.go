package web

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/crawlhouse/crawlhouse/internal/textdiff"
)

// A diff as the pages show it: hunks of numbered lines, as `diff -u`
// cuts them, with the words that changed within a changed line marked.

// diffLine is one line of a diff: its op, its numbers in the old and the
// new text (0 where it is not a line of that text), and its text as spans,
// Match marking the words that changed when the line was paired with the
// line it replaced.
type diffLine struct {
	Op       textdiff.Op
	Old, New int
	Parts    []span
}

// hunk is a run of changed lines with their context, under a unified
// diff's header (@@ -old,n +new,m @@).
type hunk struct {
	Header string
	Lines  []diffLine
}

// maxWordDiff bounds the bytes of the changed lines whose words one diff
// compares; past it, further changed lines are shown unmarked.
const maxWordDiff = 256 << 10

// diffView numbers the edits, marks the changed words of each removed line
// paired with an added one (the i-th removed with the i-th added of a
// change), and cuts the lines into hunks with context lines around each
// change.
func diffView(edits []textdiff.Edit, context int) []hunk {
	lines := make([]diffLine, len(edits))
	old, cur := 0, 0
	for i, e := range edits {
		l := diffLine{Op: e.Op, Parts: []span{{Text: e.Line}}}
		if e.Op != textdiff.Insert {
			old++
			l.Old = old
		}
		if e.Op != textdiff.Delete {
			cur++
			l.New = cur
		}
		lines[i] = l
	}
	markWords(edits, lines)
	var out []hunk
	for _, run := range hunks(edits, context) {
		out = append(out, numbered(lines[run[0]:run[1]]))
	}
	return out
}

// markWords marks the changed words of the removed and added lines of each
// change, pairing them in order, within maxWordDiff bytes in all.
func markWords(edits []textdiff.Edit, lines []diffLine) {
	budget := maxWordDiff
	for i := 0; i < len(edits); {
		if edits[i].Op != textdiff.Delete {
			i++
			continue
		}
		dels := i
		for i < len(edits) && edits[i].Op == textdiff.Delete {
			i++
		}
		ins := i
		for i < len(edits) && edits[i].Op == textdiff.Insert {
			i++
		}
		for k := 0; k < min(ins-dels, i-ins); k++ {
			a, b := edits[dels+k].Line, edits[ins+k].Line
			if budget -= len(a) + len(b); budget < 0 {
				return
			}
			lines[dels+k].Parts, lines[ins+k].Parts = wordDiff(a, b)
		}
	}
}

// wordDiff marks the words of a that b does not keep, and the words of b
// that a did not hold: the lines split into runs of letters and digits and
// runs of anything else, compared as textdiff compares lines.
func wordDiff(a, b string) (old, new []span) {
	ta, tb := words(a), words(b)
	d := textdiff.Diff(strings.Join(ta, "\n"), strings.Join(tb, "\n"))
	i, j := 0, 0
	for _, e := range d.Edits {
		switch e.Op {
		case textdiff.Equal:
			old, new = appendSpan(old, ta[i], false), appendSpan(new, tb[j], false)
			i, j = i+1, j+1
		case textdiff.Delete:
			old = appendSpan(old, ta[i], true)
			i++
		case textdiff.Insert:
			new = appendSpan(new, tb[j], true)
			j++
		}
	}
	return old, new
}

// appendSpan adds text to spans, joining it to the last span of the same
// marking.
func appendSpan(spans []span, text string, match bool) []span {
	if n := len(spans); n > 0 && spans[n-1].Match == match {
		spans[n-1].Text += text
		return spans
	}
	return append(spans, span{Text: text, Match: match})
}

// words splits a line into runs of letters and digits and runs of anything
// else, which together are the line.
func words(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if i > start && isWord(r) != isWord(firstRune(s[start:])) {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func firstRune(s string) rune {
	for _, r := range s {
		return r
	}
	return 0
}

// numbered is a hunk of lines with its header: where it starts in each
// text and how many of its lines each holds (a text holding none starts
// at the line before, as in `diff -u`).
func numbered(lines []diffLine) hunk {
	oldStart, oldN, newStart, newN := 0, 0, 0, 0
	for _, l := range lines {
		if l.Old > 0 {
			if oldN == 0 {
				oldStart = l.Old
			}
			oldN++
		}
		if l.New > 0 {
			if newN == 0 {
				newStart = l.New
			}
			newN++
		}
	}
	return hunk{Header: "@@ -" + rangeOf(oldStart, oldN) + " +" + rangeOf(newStart, newN) + " @@", Lines: lines}
}

// rangeOf is one side of a hunk's header: start,n. A side with no line in
// the hunk is an empty text (any other has context lines in every hunk):
// 0,0.
func rangeOf(start, n int) string {
	return strconv.Itoa(start) + "," + strconv.Itoa(n)
}
