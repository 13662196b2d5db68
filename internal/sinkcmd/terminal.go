package sinkcmd

import (
	"unicode"
	"unicode/utf8"
)

// terminalText makes a text from the crawl API or a crawled page safe for
// a terminal line, at most n runes: every control character (C0 with
// newlines and tabs, DEL, C1), every format character (Unicode bidi
// controls such as U+202E RIGHT-TO-LEFT OVERRIDE, zero-width characters)
// and the line and paragraph separators are replaced, so no text can move
// the cursor, rewrite the screen, start an escape sequence or reorder what
// is shown. Whitespace controls become a space, the others U+FFFD, which
// shows that something was there; invalid UTF-8 becomes U+FFFD too.
func terminalText(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		switch {
		case c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' || c == '\u2028' || c == '\u2029':
			r[i] = ' '
		case unicode.IsControl(c) || unicode.Is(unicode.Cf, c):
			r[i] = utf8.RuneError
		}
	}
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return string(r)
}
