package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf16"
)

// A Document is nearly all text: the markdown and html of a page are tens of
// kilobytes, its other fields a few hundred bytes. encoding/json reads a
// value twice (it checks the whole input, then decodes it) and unquotes
// strings byte by byte; on the sink that was most of its CPU, taken from
// ClickHouse on the same cores. decodeLifted lifts the Document's top-level
// strings out (the receiver's scanner finds them, checking the syntax at
// eight bytes a time), lets encoding/json decode what is left, and unquotes
// the strings itself, copying the runs between escapes. The result is the
// one encoding/json gives (FuzzDocumentDifferential); anything it is not
// sure of, it leaves to encoding/json.

// liftedFields are the Document's top-level string fields, by JSON name.
var liftedFields = [...]struct {
	name  string
	field func(*documentFields) *string
}{
	{"markdown", func(f *documentFields) *string { return &f.Markdown }},
	{"html", func(f *documentFields) *string { return &f.HTML }},
	{"rawHtml", func(f *documentFields) *string { return &f.RawHTML }},
	{"summary", func(f *documentFields) *string { return &f.Summary }},
	{"screenshot", func(f *documentFields) *string { return &f.Screenshot }},
	{"audio", func(f *documentFields) *string { return &f.Audio }},
	{"video", func(f *documentFields) *string { return &f.Video }},
	{"answer", func(f *documentFields) *string { return &f.Answer }},
	{"highlights", func(f *documentFields) *string { return &f.Highlights }},
	{"warning", func(f *documentFields) *string { return &f.Warning }},
}

// liftAtLeast is the size of a string value worth lifting: shorter ones
// cost encoding/json little.
const liftAtLeast = 256

var errNotLifted = errors.New("left to encoding/json")

// decodeLifted decodes the object b as json.Unmarshal(b, &f) would. ok is
// false when b is not valid JSON and UTF-8, when a lifted field's key comes
// twice or in another case (encoding/json's matching then decides), or when
// what is left does not decode strictly: the caller decodes b itself.
func decodeLifted(b []byte) (f documentFields, ok bool) {
	if len(b) < liftAtLeast || b[0] != '{' {
		return f, false
	}
	if f, ok := decodeDirect(b); ok {
		return f, true
	}
	type cut struct{ start, end, field int }
	var cuts [len(liftedFields)]cut
	var seen [len(liftedFields)]bool
	n := 0
	s := scanner{b: b}
	err := s.members(func(key []byte, escaped bool) error {
		start := s.i
		if err := s.value(); err != nil {
			return err
		}
		k := unescapeKey(key, escaped)
		for j := range liftedFields {
			name := liftedFields[j].name
			if string(k) != name {
				if len(k) == len(name) && bytes.EqualFold(k, []byte(name)) {
					return errNotLifted
				}
				continue
			}
			if seen[j] {
				return errNotLifted
			}
			seen[j] = true
			if b[start] == '"' && s.i-start >= liftAtLeast {
				cuts[n] = cut{start, s.i, j}
				n++
			}
			break
		}
		return nil
	})
	if err != nil || n == 0 {
		return f, false
	}
	if s.ws(); s.i != len(b) {
		return f, false
	}
	// What is left: b with each lifted string replaced by "".
	size := len(b)
	for _, c := range cuts[:n] {
		size -= c.end - c.start - 2
	}
	rest := make([]byte, 0, size)
	at := 0
	for _, c := range cuts[:n] {
		rest = append(append(rest, b[at:c.start]...), '"', '"')
		at = c.end
	}
	rest = append(rest, b[at:]...)
	if json.Unmarshal(rest, &f) != nil {
		return documentFields{}, false
	}
	for _, c := range cuts[:n] {
		*liftedFields[c.field].field(&f) = unquote(b[c.start:c.end])
	}
	return f, true
}

// unquote is encoding/json's value of the string literal q, which the
// scanner has checked (valid escapes, no control characters, UTF-8): the
// escapes decoded, a \u surrogate that is not half of a pair as U+FFFD.
func unquote(q []byte) string {
	q = q[1 : len(q)-1]
	i := bytes.IndexByte(q, '\\')
	if i < 0 {
		return string(q)
	}
	// A Builder's String does not copy: the page's text is copied once.
	var out strings.Builder
	out.Grow(len(q))
	for i >= 0 {
		out.Write(q[:i])
		q = q[i:]
		switch c := q[1]; c {
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r := hex4(q[2:6])
			if utf16.IsSurrogate(r) {
				r = unicode.ReplacementChar
				if len(q) >= 12 && q[6] == '\\' && q[7] == 'u' {
					if pair := utf16.DecodeRune(hex4(q[2:6]), hex4(q[8:12])); pair != unicode.ReplacementChar {
						r, q = pair, q[6:]
					}
				}
			}
			out.WriteRune(r)
			q = q[4:]
		default: // '"', '\\', '/'
			out.WriteByte(c)
		}
		q = q[2:]
		i = bytes.IndexByte(q, '\\')
	}
	out.Write(q)
	return out.String()
}

// hex4 is the value of four hexadecimal digits.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
