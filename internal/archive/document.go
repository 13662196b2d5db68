package archive

import "bytes"

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
	out := cutValue(raw, `"markdown":`, markdown, markdownMarker)
	return cutValue(out, `"html":`, html, htmlMarker)
}

// cutValue replaces the first key+jsonString(value) in doc by key+marker.
func cutValue(doc []byte, key, value string, marker byte) []byte {
	want := make([]byte, 0, len(key)+len(value)+len(value)/16+2)
	want = append(want, key...)
	want = appendJSONString(want, value)
	i := bytes.Index(doc, want)
	if i < 0 {
		return doc
	}
	out := make([]byte, 0, len(doc)-len(want)+len(key)+1)
	out = append(out, doc[:i+len(key)]...)
	out = append(out, marker)
	return append(out, doc[i+len(want):]...)
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
