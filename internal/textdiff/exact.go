package textdiff

import "strings"

// Exact is the line diff that jsdiff (the npm package "diff", whose
// createTwoFilesPatch writes the crawl API's git-diff mode) finds, edit for
// edit, so that a unified diff written from it is the crawl API's byte for
// byte (events.NewTrackingDiff).
//
// It differs from Diff where jsdiff does: a line is compared with its
// terminator, so "a\r\n", "a\n" and a last "a" without one are three
// different lines; no common suffix is trimmed first; the search is Myers'
// greedy forward search making jsdiff's choices (an insertion when it
// reaches further in the old text than a deletion, the deletion on a tie,
// no path past either text's end). Each Edit's Line is its line without
// the final "\n" (a "\r" before it stays) and NoNewline marks a text's last
// line when it has none.
//
// Bounded as Diff is: past MaxEdits edits or MaxWork steps the common
// prefix and suffix are kept and the middle is shown whole (every old line
// removed, every new one added) with Coarse set; jsdiff, unbounded, would
// go on, so only then may the two differ.
func Exact(old, new string) Result {
	a, b := splitTerminated(old), splitTerminated(new)
	x, y := numbered(a, b)
	s := &search{a: a, b: b, x: x, y: y, work: MaxWork}
	if last, ok := s.run(); ok {
		return Result{Edits: s.edits(last)}
	}
	return Result{Edits: s.whole(), Coarse: true}
}

// splitTerminated splits s into lines that keep their "\n", as jsdiff's
// diffLines tokenizes: the last line may have none.
func splitTerminated(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n') + 1
		if i == 0 {
			i = len(s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// search is one Exact search: the texts as lines and as line numbers and
// the work left.
type search struct {
	a, b []string
	x, y []int32
	work int
}

// step is a path's edit (Insert or Delete; none for the path's start)
// followed by equal lines, and the step before it: paths share their
// beginnings, as jsdiff's components do.
type step struct {
	prev   *step
	op     Op
	common int
}

// path is the furthest point reached on one diagonal: i old lines done,
// and its last step.
type path struct {
	i    int
	last *step
}

// run searches, edit count by edit count, for the first path that reaches
// both texts' ends, with jsdiff's choices (see Exact). It reports false
// past MaxEdits or MaxWork.
func (s *search) run() (*step, bool) {
	n, m := len(s.a), len(s.b)
	start := &path{last: &step{}}
	if s.snake(start, 0) {
		return start.last, true
	}
	maxD := min(n+m, MaxEdits)
	off := maxD + 1
	best := make([]*path, 2*maxD+3) // best[off+k]: diagonal k (old done - new done)
	best[off] = start
	minK, maxK := -maxD-1, maxD+1
	for d := 1; d <= maxD; d++ {
		for k := max(minK, -d); k <= min(maxK, d); k += 2 {
			del, ins := best[off+k-1], best[off+k+1]
			best[off+k-1] = nil
			canIns := ins != nil && ins.i-(k+1) >= 0 && ins.i-(k+1) < m
			canDel := del != nil && del.i < n
			if !canIns && !canDel {
				best[off+k] = nil
				continue
			}
			var p *path
			if !canDel || (canIns && del.i < ins.i) {
				p = &path{i: ins.i, last: &step{prev: ins.last, op: Insert}}
			} else {
				p = &path{i: del.i + 1, last: &step{prev: del.last, op: Delete}}
			}
			if s.snake(p, k) {
				return p.last, true
			}
			if s.work < 0 {
				return nil, false
			}
			best[off+k] = p
			if p.i >= n {
				maxK = min(maxK, k-1)
			}
			if p.i-k >= m {
				minK = max(minK, k+1)
			}
		}
	}
	return nil, false
}

// snake follows equal lines from p on diagonal k, counts them in p's last
// step and reports whether p then reached both ends.
func (s *search) snake(p *path, k int) bool {
	i, j := p.i, p.i-k
	for i < len(s.x) && j < len(s.y) && s.x[i] == s.y[j] {
		i, j = i+1, j+1
		s.work--
	}
	s.work--
	p.last.common += i - p.i
	p.i = i
	return i >= len(s.x) && j >= len(s.y)
}

// edits writes the path ending at last as edits, in order.
func (s *search) edits(last *step) []Edit {
	var steps []*step
	for st := last; st != nil; st = st.prev {
		steps = append(steps, st)
	}
	out := make([]Edit, 0, len(s.a)+len(s.b))
	i, j := 0, 0
	for n := len(steps) - 1; n >= 0; n-- {
		switch steps[n].op {
		case Insert:
			out = append(out, terminated(Insert, s.b[j]))
			j++
		case Delete:
			out = append(out, terminated(Delete, s.a[i]))
			i++
		}
		for c := 0; c < steps[n].common; c++ {
			out = append(out, terminated(Equal, s.a[i]))
			i, j = i+1, j+1
		}
	}
	return out
}

// whole is the coarse diff: the common prefix and suffix equal, the middle
// removed, then added.
func (s *search) whole() []Edit {
	pre, suf := 0, 0
	for pre < len(s.x) && pre < len(s.y) && s.x[pre] == s.y[pre] {
		pre++
	}
	for suf < len(s.x)-pre && suf < len(s.y)-pre && s.x[len(s.x)-1-suf] == s.y[len(s.y)-1-suf] {
		suf++
	}
	var out []Edit
	add := func(op Op, lines []string) {
		for _, l := range lines {
			out = append(out, terminated(op, l))
		}
	}
	add(Equal, s.a[:pre])
	add(Delete, s.a[pre:len(s.a)-suf])
	add(Insert, s.b[pre:len(s.b)-suf])
	add(Equal, s.a[len(s.a)-suf:])
	return out
}

// terminated is the edit of a line that may keep its "\n".
func terminated(op Op, line string) Edit {
	l, ok := strings.CutSuffix(line, "\n")
	return Edit{Op: op, Line: l, NoNewline: !ok}
}
