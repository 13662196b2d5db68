// Package clip bounds a crawled text (a URL, an error, a scope, a page's
// source) to a number of bytes without splitting a character: alerts and
// change summaries cut each field to MaxField, the web pages cut what they
// show. It imports nothing of the project.
package clip

import "unicode/utf8"

// MaxField is the most bytes of a crawled text (a URL, an error, a scope)
// that one field of an alert or a change summary holds.
const MaxField = 2048

// Prefix returns s cut to at most n bytes on a character boundary, and
// whether it was cut.
func Prefix(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	// Back to the start of the rune the cut falls in (at most UTFMax-1
	// bytes: further back, s was not UTF-8 there anyway).
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return s[:n], true
}

// Cut cuts s to at most n bytes on a character boundary, ending it in "…"
// when it was cut (the ellipsis adds 3 bytes).
func Cut(s string, n int) string {
	if p, cut := Prefix(s, n); cut {
		return p + "…"
	}
	return s
}
