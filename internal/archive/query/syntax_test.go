package query

import (
	"errors"
	"strings"
	"testing"
)

// Syntax of other search engines is refused, naming q and what is not
// supported, instead of being searched as words or dropped: OR, -word and
// word* outside quotes. The same characters as punctuation inside a word,
// or inside a phrase, are text.
func TestSearchSyntaxUnsupported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q, refused string // refused: "" when accepted, else a part of the reason
	}{
		{"pricing OR plans", "OR is not supported"},
		{"OR", "OR is not supported"},
		{"pricing -draft", "-word"},
		{"-draft pricing", "-word"},
		{"-Über", "-word"},
		{"price*", "word*"},
		{`"exact phrase" pric*`, "word*"},
		{"pricing or plans", ""},     // or, lower-case: a word
		{"covid-19 e-mail", ""},      // a hyphen inside a word
		{"pricing - plans", ""},      // a lone dash
		{`"pricing OR -plans*"`, ""}, // inside a phrase: punctuation
		{"a * b", ""},
		{"ORegon", ""},
	} {
		_, err := parseText(tc.q)
		var pe *ParamError
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%q refused: %v", tc.q, err)
		case tc.refused != "" && (!errors.As(err, &pe) || pe.Param != "q" || !strings.Contains(pe.Reason, tc.refused)):
			t.Errorf("%q: error %v, want parameter q refused with %q", tc.q, err, tc.refused)
		}
	}
}
