package sinkcmd

import (
	"testing"
	"unicode"
)

// TestTerminalText: nothing from the API or a page reaches the terminal as
// a control: C0 (escape sequences, bell, backspace, carriage return), DEL,
// C1 (CSI U+009B starts a sequence on its own), bidi and other format
// characters, line separators; invalid UTF-8 is replaced too.
func TestTerminalText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		n              int // 100 when 0
	}{
		{"plain", "Request failed with status code 502", "Request failed with status code 502", 0},
		{"newlines and tabs", "a\nb\r\nc\td\ve\ff", "a b  c d e f", 0},
		{"escape sequence", "\x1b[2J\x1b]8;;https://evil/\x07link", "\uFFFD[2J\uFFFD]8;;https://evil/\uFFFDlink", 0},
		{"backspace and NUL", "ok\b\b\x00", "ok\uFFFD\uFFFD\uFFFD", 0},
		{"DEL", "a\x7fb", "a\uFFFDb", 0},
		{"C1 CSI", "a\u009b31mb\u0085c", "a\uFFFD31mb\uFFFDc", 0},
		{"bidi override", "evil\u202Etxt.exe", "evil\uFFFDtxt.exe", 0},
		{"bidi isolates and marks", "\u2066a\u2069\u200e\u200f", "\uFFFDa\uFFFD\uFFFD\uFFFD", 0},
		{"zero width", "a\u200bb\ufeffc", "a\uFFFDb\uFFFDc", 0},
		{"line separators", "a\u2028b\u2029c", "a b c", 0},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb", 0},
		{"kept: non-ASCII text", "Ünïcödé 日本語 😀", "Ünïcödé 日本語 😀", 0},
		{"cut at n runes", "ééééé", "ééé…", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := tc.n
			if n == 0 {
				n = 100
			}
			got := terminalText(tc.in, n)
			if got != tc.want {
				t.Errorf("terminalText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	// Every rune a terminal could act on, one at a time.
	for c := rune(0); c <= 0x10FFFF; c++ {
		if !unicode.IsControl(c) && !unicode.Is(unicode.Cf, c) {
			continue
		}
		for _, out := range terminalText(string(c), 10) {
			if unicode.IsControl(out) || unicode.Is(unicode.Cf, out) {
				t.Fatalf("U+%04X reaches the terminal as U+%04X", c, out)
			}
		}
	}
}
