package web

import (
	"bytes"
	"context"
	"errors"
	"unicode"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// goldmark, the markdown renderer, is quadratic on some shapes of input
// that crawled markdown can have: 128 KiB of "[a](" took 5 s (each "](" scans
// the rest of the line for a destination that never ends), 128 KiB of ">"
// 11 s (each level of nested block quotes peeks the rest of the line
// again), and unmatched emphasis delimiters walk the delimiter stack once
// each. It takes no context and cannot be stopped from outside, so a
// render is metered from inside: the reader of the block stage and an
// inline parser that goldmark calls before its own at every character
// that starts one (and declines to parse) charge a renderBudget what the
// parsers after them may scan from there: up to the character that ends
// the scan (the end of the line when there is none), the delimiters open
// so far where delimiters are matched, one step elsewhere. Past the budget, or once the
// request's context is done (the reader left, or the render's deadline
// passed), the next charge stops the render by a panic that markdown
// recovers, and the page shows the markdown as text.

// renderBudget is what one render may spend, in steps, and the context it
// stops with. Not safe for concurrent use: one per render.
type renderBudget struct {
	ctx  context.Context
	left int64
	// charges counts the charges, to look at ctx every ctxEvery of them.
	charges int
	// parent is the inline parent being parsed; open the runs of each
	// emphasis delimiter ("*", "_", "~") it left unmatched so far, and
	// brackets the "[" not closed by a "]".
	parent   ast.Node
	open     map[byte]int64
	brackets int64
}

// unmatched is how many delimiters of the parent are open: how far
// matching the next one may walk back.
func (b *renderBudget) unmatched() int64 {
	n := b.brackets
	for _, o := range b.open {
		n += o
	}
	return n
}

// ctxEvery is how many charges pass between two looks at the context.
const ctxEvery = 64

// errBudget is a render that went past its budget.
var errBudget = errors.New("the render went past its budget")

// stopRender is the panic that stops a render; markdown recovers it.
type stopRender struct{ err error }

func (b *renderBudget) charge(steps int64) {
	b.left -= steps
	if b.left < 0 {
		panic(stopRender{errBudget})
	}
	if b.charges++; b.charges%ctxEvery == 0 {
		if err := b.ctx.Err(); err != nil {
			panic(stopRender{err})
		}
	}
}

// budgetKey holds a render's budget in goldmark's parser context.
var budgetKey = parser.NewContextKey()

// meteredReader is the block stage's reader, charging each line it hands
// out by its length.
type meteredReader struct {
	text.Reader
	budget *renderBudget
}

func (r meteredReader) PeekLine() ([]byte, text.Segment) {
	line, seg := r.Reader.PeekLine()
	r.budget.charge(1 + int64(len(line)))
	return line, seg
}

func (r meteredReader) AdvanceLine() {
	r.budget.charge(1)
	r.Reader.AdvanceLine()
}

// meter is the inline parser that charges the budget; it parses nothing.
type meter struct{}

// meterFirst puts the meter before every inline parser of goldmark's.
const meterFirst = 0

// Trigger is every character that starts an inline parser of goldmark's
// or of its GFM extension (space stands for the start of a line and
// spaces).
func (meter) Trigger() []byte {
	return []byte{' ', '`', '[', ']', '!', '<', '*', '_', '~', '(', ':', '@'}
}

func (meter) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	b := pc.Get(budgetKey).(*renderBudget)
	if parent != b.parent {
		b.parent, b.open, b.brackets = parent, map[byte]int64{}, 0
	}
	line, _ := block.PeekLine()
	if len(line) == 0 {
		b.charge(1)
		return nil
	}
	switch c := line[0]; c {
	case '*', '_', '~':
		// An emphasis delimiter after text may close one open of its
		// kind; otherwise it stays open, and matching the next walks
		// back over it.
		before := block.PrecendingCharacter()
		if b.open[c] > 0 && !unicode.IsSpace(before) && !unicode.IsPunct(before) && !unicode.IsSymbol(before) {
			b.open[c]--
		} else {
			b.open[c]++
		}
		b.charge(1 + b.unmatched())
	case '[':
		b.brackets++
		b.charge(1 + b.unmatched())
	case ']':
		// A link's destination or label is scanned to its closing
		// character, or to the end of the line when there is none.
		b.brackets = max(b.brackets-1, 0)
		b.charge(1 + scanned(line, ')'))
	case '<':
		b.charge(1 + scanned(line, '>'))
	case '`':
		b.charge(1 + scanned(line[1:], '`'))
	case '(':
		// An autolink without brackets (GFM) runs to a space.
		b.charge(1 + scanned(line, ' '))
	default:
		b.charge(1)
	}
	return nil
}

// scanned is how far a parser scans line for c: to it, else to the end.
func scanned(line []byte, c byte) int64 {
	if i := bytes.IndexByte(line, c); i >= 0 {
		return int64(i)
	}
	return int64(len(line))
}

var _ parser.InlineParser = meter{}

// meterOption adds the meter to a goldmark parser.
func meterOption() parser.Option {
	return parser.WithInlineParsers(util.Prioritized(meter{}, meterFirst))
}
