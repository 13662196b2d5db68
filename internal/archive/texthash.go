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

// TextHash is the text hash of markdown (TextHasher.Sum with a buffer of its
// own).
func TextHash(markdown string) uint64 {
	var h TextHasher
	return h.Sum(markdown)
}

// appendNormalizedText appends s to dst with every run of whitespace made
// one space and none at either end. The bytes between runs are copied in
// one piece each.
func appendNormalizedText(dst []byte, s string) []byte {
	start := len(dst)
	copied := 0 // s[:copied] is in dst, normalised
	for i := 0; i < len(s); {
		if !mayStartWhitespace[s[i]] {
			i++
			continue
		}
		n := whitespaceAt(s, i)
		if n == 0 {
			i++
			continue
		}
		dst = append(dst, s[copied:i]...)
		for i += n; i < len(s); i += n {
			if n = whitespaceAt(s, i); n == 0 {
				break
			}
		}
		copied = i
		// A run at the start becomes nothing, one at the end too (below).
		if len(dst) > start {
			dst = append(dst, ' ')
		}
	}
	dst = append(dst, s[copied:]...)
	if copied == len(s) && len(dst) > start && dst[len(dst)-1] == ' ' {
		dst = dst[:len(dst)-1]
	}
	return dst
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
