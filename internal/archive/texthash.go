package archive

import "github.com/go-faster/city"

// TextHasher computes the text hash of a page's markdown, the hash change
// tracking compares versions by (pages.text_hash, page_versions.text_hash):
// ClickHouse's
//
//	cityHash64(trimBoth(replaceRegexpAll(markdown, '[\s\x0B\x{85}\p{Z}]+', ' ')))
//
// bit for bit. Versions archived before the sink computed it were hashed by
// that expression, in ClickHouse, and are compared with the versions hashed
// here, so the two must never differ: every run of whitespace characters
// becomes one ASCII space and spaces are trimmed at both ends, then the
// bytes are hashed with CityHash64 v1.0.2, the version ClickHouse's
// cityHash64 implements (city.CH64).
//
// The whitespace characters are those of the RE2 class above: RE2's \s (tab,
// line feed, form feed, carriage return, space), vertical tab, U+0085 and
// Unicode's separators (\p{Z}: U+00A0, U+1680, U+2000–U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000). Format characters such as U+200B, U+FEFF
// and U+180E are not whitespace and stay. RE2 matches them as the bytes of
// their UTF-8 encoding, and so does whitespaceAt: a byte of invalid UTF-8 is
// never whitespace and is hashed as it is, and no whitespace character can
// start inside another character's encoding (each starts with an ASCII or
// a leading byte, never a continuation byte).
//
// A TextHasher keeps its buffer for the next page, so hashing a batch
// allocates once, not once a page. It is not safe for concurrent use; the
// zero value is ready.
type TextHasher struct {
	buf []byte
}

// Sum is the text hash of markdown.
func (h *TextHasher) Sum(markdown string) uint64 {
	h.buf = appendNormalizedText(h.buf[:0], markdown)
	return city.CH64(h.buf)
}

// appendNormalizedText appends s to dst with every run of whitespace made
// one space and none at either end.
//
// Most of a page needs no change: its whitespace is a lone space between two
// words, which stays as it is. So the text is read eight bytes at a time
// while they hold no byte that may need a change (skipPlain), and one byte at a
// time only where they do; the bytes between the runs that change are copied
// in one piece each.
func appendNormalizedText(dst []byte, s string) []byte {
	copied := 0 // s[:copied] is in dst, normalised
	for i := 0; i < len(s); {
		// Not at 0: a space there is trimmed.
		if i > 0 {
			i = skipPlain(s, i)
		}
		for stop := min(i+8, len(s)); i < stop; {
			c := s[i]
			if !mayStartWhitespace[c] {
				i++
				continue
			}
			// A lone space between two other characters stays. (s[i-1] is
			// no whitespace: a run is consumed whole.)
			if c == ' ' && i > 0 && i+1 < len(s) && !mayStartWhitespace[s[i+1]] {
				i += 2
				continue
			}
			n := whitespaceAt(s, i)
			if n == 0 {
				i++
				continue
			}
			end := i + n
			for end < len(s) {
				m := whitespaceAt(s, end)
				if m == 0 {
					break
				}
				end += m
			}
			// A run at the start or at the end becomes nothing (trimBoth).
			dst = append(dst, s[copied:i]...)
			if i > 0 && end < len(s) {
				dst = append(dst, ' ')
			}
			copied, i = end, end
		}
	}
	return append(dst, s[copied:]...)
}

// skipPlain returns the index of the first of the eight-byte blocks from
// s[i] on that may not stay as they are: that hold a control character or a
// non-ASCII byte, or a space followed by one of those or by a space (the
// byte after the block included). It may stop at a block that does stay
// (the byte-wise path then finds so), never skip one that does not. It stops
// nine bytes before the end at the latest.
func skipPlain(s string, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+9 <= len(s); i += 8 {
		b := s[i : i+9]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		next := w>>8 | uint64(b[8])<<56 // the byte after each byte of w
		// Bytes below 0x20 or from 0x80 (every byte below n sets its high
		// bit in x - n*ones; a byte from 0x80 has it set already).
		special := ((w - 0x20*ones) | w) & highs
		// Spaces, and bytes after them that are spaces or special.
		spaces := ((w ^ 0x20*ones) - ones) &^ (w ^ 0x20*ones) & highs
		afterSpace := ((next - 0x21*ones) | next) & highs
		if special|spaces&afterSpace != 0 {
			break
		}
	}
	return i
}

// mayStartWhitespace marks the bytes a whitespace character's encoding
// starts with.
var mayStartWhitespace = func() (t [256]bool) {
	for _, b := range []byte{'\t', '\n', '\v', '\f', '\r', ' ', 0xC2, 0xE1, 0xE2, 0xE3} {
		t[b] = true
	}
	return t
}()

// whitespaceAt is the length of the UTF-8 encoding of the whitespace
// character at s[i], 0 when there is none.
func whitespaceAt(s string, i int) int {
	switch b := s[i]; b {
	case '\t', '\n', '\v', '\f', '\r', ' ':
		return 1
	case 0xC2: // U+0085, U+00A0
		if i+1 < len(s) && (s[i+1] == 0x85 || s[i+1] == 0xA0) {
			return 2
		}
	case 0xE1: // U+1680
		if i+2 < len(s) && s[i+1] == 0x9A && s[i+2] == 0x80 {
			return 3
		}
	case 0xE2: // U+2000–U+200A, U+2028, U+2029, U+202F; U+205F
		if i+2 >= len(s) {
			return 0
		}
		c := s[i+2]
		switch s[i+1] {
		case 0x80:
			if c <= 0x8A && c >= 0x80 || c == 0xA8 || c == 0xA9 || c == 0xAF {
				return 3
			}
		case 0x81:
			if c == 0x9F {
				return 3
			}
		}
	case 0xE3: // U+3000
		if i+2 < len(s) && s[i+1] == 0x80 && s[i+2] == 0x80 {
			return 3
		}
	}
	return 0
}
