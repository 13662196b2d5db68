package web

import (
	"context"
	"errors"

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
// parsers after them may scan from there: the rest of the line where a
// scan to the end of the line may start, the delimiters open so far where
// delimiters are matched, one step elsewhere. Past the budget, or once the
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
	// parent and open are the inline parent being parsed and how many
	// delimiters ("*", "_", "~", "[") it opened so far.
	parent ast.Node
	open   int64
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
		b.parent, b.open = parent, 0
	}
	line, _ := block.PeekLine()
	switch {
	case len(line) == 0:
		b.charge(1)
	case line[0] == '*' || line[0] == '_' || line[0] == '~' || line[0] == '[':
		b.open++
		b.charge(b.open)
	case line[0] == ']' || line[0] == '<' || line[0] == '`' || line[0] == '!' || line[0] == '(':
		b.charge(1 + int64(len(line)))
	default:
		b.charge(1)
	}
	return nil
}

var _ parser.InlineParser = meter{}

// meterOption adds the meter to a goldmark parser.
func meterOption() parser.Option {
	return parser.WithInlineParsers(util.Prioritized(meter{}, meterFirst))
}
