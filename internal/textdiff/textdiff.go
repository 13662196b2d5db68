// Package textdiff compares two texts line by line and writes the
// difference as a unified diff: the diff of two archived versions of a page
// (`sink diff`, and the read API after it). It knows nothing of where the
// texts come from.
//
// The diff is written here rather than imported: no module of the allowed
// set diffs text in bounded memory (kylelemons/godebug's diff, present only
// as an indirect test dependency, fills an N×M table, 10^10 cells for two
// 100,000-line pages), and the standard library's is internal.
//
// Bounded time and memory, whatever the pages: the common prefix and suffix
// are trimmed in linear time; the differing middle is diffed with Myers'
// O(ND) algorithm up to MaxEdits edits; past that, lines that occur once in
// each text anchor the middle (patience diff) and each gap between anchors
// is diffed with Myers again, under the same cap; a gap still past the cap,
// or any work past MaxWork steps, is shown as a whole: every old line of it
// removed, every new line added. Result.Coarse then says the diff is
// correct (applying it gives the new text) but not minimal.
package textdiff

import (
	"strings"
)

// Limits of one diff. Myers keeps one diagonal array per edit,
// MaxEdits²·4 bytes at most (4 MB); MaxWork bounds the steps of all
// searches together, so a diff costs O(lines + MaxWork) time.
const (
	MaxEdits = 1000
	MaxWork  = 50_000_000
)

// Op is what an edit does to a line.
type Op byte

// The ops, each the byte that starts its line in a unified diff.
const (
	Equal  Op = ' ' // a line of both texts
	Delete Op = '-' // a line of the old text only
	Insert Op = '+' // a line of the new text only
)

// Edit is one line of the diff: a line of both texts (Equal), of the old
// only (Delete) or of the new only (Insert).
type Edit struct {
	Op   Op
	Line string
	// NoNewline marks a text's last line that has no "\n" (Exact only:
	// Diff does not tell them apart).
	NoNewline bool
}

// Result is the line diff of two texts.
type Result struct {
	// Edits turn the old text's lines into the new's, in order.
	Edits []Edit
	// Coarse is true when a limit was reached and some differing block is
	// shown whole rather than line by line (see the package comment).
	Coarse bool
}

// Changed reports whether the texts differ.
func (r Result) Changed() bool {
	for _, e := range r.Edits {
		if e.Op != Equal {
			return true
		}
	}
	return false
}

// Lines splits a text into lines, the way Diff compares them: a line ends
// at "\n" or "\r\n" (so a page that only changed its line endings is
// unchanged), and a missing final newline is not a difference.
func Lines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// Diff compares the lines of old and new (see Lines).
func Diff(old, new string) Result {
	a, b := Lines(old), Lines(new)
	x, y := numbered(a, b)
	d := &differ{a: a, b: b, x: x, y: y, work: MaxWork}
	d.diff(0, len(a), 0, len(b), true)
	return Result{Edits: d.edits, Coarse: d.coarse}
}

// numbered gives each distinct line of a and b a number, so that lines
// are compared as numbers, and returns both texts as those numbers.
func numbered(a, b []string) (x, y []int32) {
	ids := make(map[string]int32, len(a)+len(b))
	number := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	return number(a), number(b)
}

// differ holds one diff's texts (as lines and as line numbers), the edits
// found so far and the work left.
type differ struct {
	a, b   []string
	x, y   []int32
	edits  []Edit
	work   int
	coarse bool
}

func (d *differ) emit(op Op, lines []string) {
	for _, l := range lines {
		d.edits = append(d.edits, Edit{Op: op, Line: l})
	}
}

// diff appends the edits of a[alo:ahi] → b[blo:bhi]. anchor says whether a
// Myers search past its cap may still be split at unique lines.
func (d *differ) diff(alo, ahi, blo, bhi int, anchor bool) {
	pre := 0
	for alo+pre < ahi && blo+pre < bhi && d.x[alo+pre] == d.y[blo+pre] {
		pre++
	}
	d.emit(Equal, d.a[alo:alo+pre])
	alo, blo = alo+pre, blo+pre
	suf := 0
	for alo < ahi-suf && blo < bhi-suf && d.x[ahi-1-suf] == d.y[bhi-1-suf] {
		suf++
	}
	ahi, bhi = ahi-suf, bhi-suf
	defer d.emit(Equal, d.a[ahi:ahi+suf])

	switch {
	case alo == ahi:
		d.emit(Insert, d.b[blo:bhi])
	case blo == bhi:
		d.emit(Delete, d.a[alo:ahi])
	case d.myers(alo, ahi, blo, bhi):
	case anchor && d.anchored(alo, ahi, blo, bhi):
	default:
		d.coarse = true
		d.emit(Delete, d.a[alo:ahi])
		d.emit(Insert, d.b[blo:bhi])
	}
}

// myers appends the shortest edit script of a[alo:ahi] → b[blo:bhi] and
// reports true, or appends nothing and reports false when it needs more
// than MaxEdits edits or more work than is left.
func (d *differ) myers(alo, ahi, blo, bhi int) bool {
	n, m := ahi-alo, bhi-blo
	maxD := min(n+m, MaxEdits)
	off := maxD + 1
	v := make([]int32, 2*maxD+3) // v[off+k]: furthest x on diagonal k
	var trace [][]int32          // trace[e]: v[off-e .. off+e] before step e
	for e := 0; e <= maxD; e++ {
		trace = append(trace, append([]int32(nil), v[off-e:off+e+1]...))
		for k := -e; k <= e; k += 2 {
			var x int
			if k == -e || (k != e && v[off+k-1] < v[off+k+1]) {
				x = int(v[off+k+1])
			} else {
				x = int(v[off+k-1]) + 1
			}
			y := x - k
			for x < n && y < m && d.x[alo+x] == d.y[blo+y] {
				x, y = x+1, y+1
				d.work--
			}
			d.work--
			if d.work < 0 {
				return false
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				d.backtrack(trace, alo, blo, n, m, e)
				return true
			}
		}
	}
	return false
}

// backtrack walks the saved diagonals from (n, m) back to the start and
// appends the edits in order.
func (d *differ) backtrack(trace [][]int32, alo, blo, n, m, e int) {
	edits := make([]Edit, 0, n+m)
	x, y := n, m
	for ; e > 0; e-- {
		prev := trace[e] // v after step e-1, diagonal k at prev[k+e]
		k := x - y
		pk := k - 1 // came right: a deletion
		if k == -e || (k != e && prev[k-1+e] < prev[k+1+e]) {
			pk = k + 1 // came down: an insertion
		}
		px := int(prev[pk+e])
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			edits = append(edits, Edit{Op: Equal, Line: d.a[alo+x]})
		}
		if x == px {
			edits = append(edits, Edit{Op: Insert, Line: d.b[blo+py]})
		} else {
			edits = append(edits, Edit{Op: Delete, Line: d.a[alo+px]})
		}
		x, y = px, py
	}
	for x > 0 {
		x, y = x-1, y-1
		edits = append(edits, Edit{Op: Equal, Line: d.a[alo+x]})
	}
	for i, j := 0, len(edits)-1; i < j; i, j = i+1, j-1 {
		edits[i], edits[j] = edits[j], edits[i]
	}
	d.edits = append(d.edits, edits...)
}

// anchored splits a[alo:ahi] → b[blo:bhi] at the longest run, in order, of
// lines that occur exactly once in each (patience diff) and diffs each gap
// between them without anchoring again. It reports false, appending
// nothing, when no such line exists.
func (d *differ) anchored(alo, ahi, blo, bhi int) bool {
	type count struct{ a, b, ai int }
	counts := make(map[int32]*count)
	for i := alo; i < ahi; i++ {
		c := counts[d.x[i]]
		if c == nil {
			c = &count{}
			counts[d.x[i]] = c
		}
		c.a++
		c.ai = i
	}
	for j := blo; j < bhi; j++ {
		if c := counts[d.y[j]]; c != nil {
			c.b++
		}
	}
	// pairs of unique lines in b's order, then the longest increasing run
	// of their a positions (patience sorting, O(n log n)).
	type pair struct{ ai, bj int }
	var pairs []pair
	for j := blo; j < bhi; j++ {
		if c := counts[d.y[j]]; c != nil && c.a == 1 && c.b == 1 {
			pairs = append(pairs, pair{c.ai, j})
		}
	}
	if len(pairs) == 0 {
		return false
	}
	tails := []int{}                // tails[l]: index in pairs ending the best run of length l+1
	prev := make([]int, len(pairs)) // prev[i]: the pair before i in its run
	for i, p := range pairs {
		lo, hi := 0, len(tails)
		for lo < hi {
			mid := (lo + hi) / 2
			if pairs[tails[mid]].ai < p.ai {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		prev[i] = -1
		if lo > 0 {
			prev[i] = tails[lo-1]
		}
		if lo == len(tails) {
			tails = append(tails, i)
		} else {
			tails[lo] = i
		}
	}
	run := make([]pair, len(tails))
	for i, l := tails[len(tails)-1], len(tails)-1; i >= 0; i, l = prev[i], l-1 {
		run[l] = pairs[i]
	}
	a, b := alo, blo
	for _, p := range run {
		d.diff(a, p.ai, b, p.bj, false)
		d.emit(Equal, d.a[p.ai:p.ai+1])
		a, b = p.ai+1, p.bj+1
	}
	d.diff(a, ahi, b, bhi, false)
	return true
}
