package archive

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// Markers that stand in the stored document_cut for the values cut out of
// it. JSON cannot hold raw control characters (inside strings they must be
// escaped), so they are unambiguous in a Document as received.
const (
	markdownMarker = '\x01'
	htmlMarker     = '\x02'
)

// CutDocument is what `pages.document_cut` stores of a Document: raw with the
// JSON string of its markdown replaced by 0x01 and of its html by 0x02, where
// raw spells them exactly as jsonString re-spells them from the markdown and
// html columns. The `document` ALIAS column (migration 0008_document_once)
// splices them back with the same spelling, so the Document read is the one
// received byte for byte; a value spelled otherwise stays in place (more
// bytes, never a different Document). The result shares no memory with raw
// when anything was cut.
func CutDocument(raw []byte, markdown, html string) []byte {
	if bytes.IndexByte(raw, markdownMarker) >= 0 || bytes.IndexByte(raw, htmlMarker) >= 0 {
		return raw // not JSON as received; keep it whole rather than guess
	}
	// Both values are found in raw as they are, without spelling them
	// first: a page's text is compared in place and the Document copied
	// once. In JSON the bytes `"key":` occur only as a key (inside a string
	// every quote is escaped), so the two matches never overlap, and the
	// first html match in raw is the first in raw with the markdown cut.
	type cut struct {
		start, end int // of key+value in raw
		key        int
		marker     byte
	}
	cuts := make([]cut, 0, 2)
	if i, end := findValue(raw, `"markdown":`, markdown); i >= 0 {
		cuts = append(cuts, cut{i, end, len(`"markdown":`), markdownMarker})
	}
	if i, end := findValue(raw, `"html":`, html); i >= 0 {
		cuts = append(cuts, cut{i, end, len(`"html":`), htmlMarker})
		if len(cuts) == 2 && cuts[1].start < cuts[0].start {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
	}
	if len(cuts) == 0 {
		return raw
	}
	if len(cuts) == 2 && cuts[0].end > cuts[1].start {
		// Only bytes that are not JSON get here: cut the markdown, then
		// look for the html in what is left.
		md := cuts[0]
		if md.marker != markdownMarker {
			md = cuts[1]
		}
		out := cutAt(raw, md.start+md.key, md.end, markdownMarker)
		if i, end := findValue(out, `"html":`, html); i >= 0 {
			return cutAt(out, i+len(`"html":`), end, htmlMarker)
		}
		return out
	}
	size := len(raw)
	for _, c := range cuts {
		size -= c.end - c.start - c.key - 1
	}
	out := make([]byte, 0, size)
	at := 0
	for _, c := range cuts {
		out = append(append(out, raw[at:c.start+c.key]...), c.marker)
		at = c.end
	}
	return append(out, raw[at:]...)
}

// cutAt is doc with doc[from:to] replaced by marker, in a new slice.
func cutAt(doc []byte, from, to int, marker byte) []byte {
	out := make([]byte, 0, len(doc)-(to-from)+1)
	return append(append(append(out, doc[:from]...), marker), doc[to:]...)
}

// findValue is where the first key+jsonString(value) is in doc: the start
// of key and the end of the string, or -1 when there is none.
func findValue(doc []byte, key, value string) (start, end int) {
	for off := 0; ; {
		i := bytes.Index(doc[off:], []byte(key))
		if i < 0 {
			return -1, -1
		}
		i += off
		if n := spelledAt(doc[i+len(key):], value); n > 0 {
			return i, i + len(key) + n
		}
		off = i + 1
	}
}

// spelledAt is the length of appendJSONString(s) when b begins with it,
// else 0. It finds the runs of b with nothing escaped eight bytes at a time
// (most of a page's text) and compares each with s whole, then takes the
// byte after it one at a time.
func spelledAt(b []byte, s string) int {
	if len(b) < len(s)+2 || b[0] != '"' {
		return 0
	}
	i, j := 0, 1
	for i < len(s) {
		k := j
		for k+8 <= len(b) && k-j < len(s)-i && !escapedIn(binary.LittleEndian.Uint64(b[k:])) {
			k += 8
		}
		if n := min(k-j, len(s)-i); n > 0 {
			if string(b[j:j+n]) != s[i:i+n] {
				return 0
			}
			i, j = i+n, j+n
			if i == len(s) {
				break
			}
		}
		switch c, e := s[i], jsonEscape[s[i]]; {
		case e != 0:
			if j+2 > len(b) || b[j] != '\\' || b[j+1] != e {
				return 0
			}
			j += 2
		case j >= len(b) || b[j] != c:
			return 0
		default:
			j++
		}
		i++
	}
	if j >= len(b) || b[j] != '"' {
		return 0
	}
	return j + 1
}

// escapedIn reports whether any of the eight bytes in x may stand for an
// escape in a JSON string: '"', '\\' or a byte below 0x20. For a byte y,
// (y - 0x01) &^ y has its high bit set exactly when y is 0; a byte at or
// above 0x80 never sets it (false positives only follow a true one).
func escapedIn(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(y uint64) uint64 { return (y - ones) &^ y & highs }
	below := (x - 0x20*ones) &^ x & highs
	return (below | zero(x^'"'*ones) | zero(x^'\\'*ones)) != 0
}

// appendJSONString is the migration's json_string: the value in quotes with
// only \ " and \b \f \n \r \t escaped, every other byte as is. It must stay
// byte for byte what the SQL expression of the `document` column computes.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	// Copy the runs between the bytes to escape whole: a page's text has
	// a newline or a quote every few dozen bytes at most.
	run := 0
	for i := 0; i < len(s); i++ {
		if e := jsonEscape[s[i]]; e != 0 {
			b = append(append(b, s[run:i]...), '\\', e)
			run = i + 1
		}
	}
	b = append(b, s[run:]...)
	return append(b, '"')
}

// jsonEscape is, for each byte appendJSONString escapes, the letter after
// its backslash; 0 for the bytes it copies.
var jsonEscape = [256]byte{'\\': '\\', '"': '"', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// AppendDocument appends to b the Document that the `document` ALIAS
// column reads from a row's stored parts (cut: document_cut; content and
// markdownBytes: the markdown followed by the html), byte for byte. The
// markdown and html are content cut at markdownBytes as the `markdown` and
// `html` aliases cut it (substring: bytes, clamped to content); then, as
// replaceOne(replaceOne(cut, 0x01, json_string(markdown)), 0x02,
// json_string(html)), the first 0x01 of cut becomes the spelled markdown
// and the first 0x02 of that result the spelled html (in the markdown only
// if its text holds a raw 0x02, which a Document as received cannot).
//
// The NDJSON export splices here rather than reading the alias: ClickHouse
// computes it with seven replaceAll passes over each value, ~30 MB/s,
// where reading the stored parts is ~10 times faster (docs/benchmarks.md,
// "Faster reads").
func AppendDocument(b []byte, cut, content string, markdownBytes uint32) []byte {
	split := min(int(markdownBytes), len(content))
	markdown, html := content[:split], content[split:]
	start := len(b)
	if i := strings.IndexByte(cut, markdownMarker); i >= 0 {
		b = appendJSONString(append(b, cut[:i]...), markdown)
		b = append(b, cut[i+1:]...)
	} else {
		b = append(b, cut...)
	}
	i := bytes.IndexByte(b[start:], htmlMarker)
	if i < 0 {
		return b
	}
	i += start
	tail := bytes.Clone(b[i+1:]) // the Document's end: a few hundred bytes
	return append(appendJSONString(b[:i], html), tail...)
}
