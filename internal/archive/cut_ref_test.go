package archive

import (
	"bytes"
	"strings"
	"testing"
)

// cutDocumentRef is CutDocument as it was first written: spell each value
// (appendJSONString), find the first key+spelling, cut it, the markdown
// first and the html in what is left. CutDocument finds the values without
// spelling them and copies the Document once; it must cut exactly the same.
func cutDocumentRef(raw []byte, markdown, html string) []byte {
	if bytes.IndexByte(raw, markdownMarker) >= 0 || bytes.IndexByte(raw, htmlMarker) >= 0 {
		return raw
	}
	cut := func(doc []byte, key, value string, marker byte) []byte {
		want := appendJSONString(append([]byte(nil), key...), value)
		i := bytes.Index(doc, want)
		if i < 0 {
			return doc
		}
		out := append([]byte(nil), doc[:i+len(key)]...)
		out = append(out, marker)
		return append(out, doc[i+len(want):]...)
	}
	return cut(cut(raw, `"markdown":`, markdown, markdownMarker), `"html":`, html, htmlMarker)
}

var cutSeeds = []struct{ raw, md, html string }{
	{`{"markdown":"a\"b\\c\nd/é","html":"<p>x</p>","metadata":{}}`, "a\"b\\c\nd/é", "<p>x</p>"},
	{`{"html":"<p>x</p>","markdown":"m\tm","metadata":{"title":"t"}}`, "m\tm", "<p>x</p>"},
	{`{"metadata":{"title":"\"markdown\":\"m\""},"markdown":"m"}`, "m", ""},
	{`{"markdown":"mm","x":{"markdown":"m"},"markdown2":"m"}`, "m", ""},
	{`{"markdown":"","html":""}`, "", ""},
	{`{"markdown":"\u0041","html":"h\b\f\r"}`, "A", "h\b\f\r"},
	{`{"markdown":"same","html":"same"}`, "same", "same"},
	{`{"markdown":"trailing\\"}`, "trailing\\", ""},
	{`{"markdown":"cut short`, "cut short", ""},
	{"{\"html\":\"a\x01b\"}", "", "a\x01b"},
	{`{"markdown":"m"}`, "m", "not there"},
	{`"markdown":"a"html":"b"`, "a", "b"},
	{`"html":"b"markdown":"a"`, "a", "b"},
}

func TestCutDocumentAgreesWithSpelling(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("text \"quoted\"\n\\ ", 300)
	plain := strings.Repeat("plain text of a page ", 50)
	seeds := append(cutSeeds, []struct{ raw, md, html string }{
		{string(appendJSONString([]byte(`{"markdown":`), long)) + `,"html":` + string(appendJSONString(nil, "<p>"+long)) + `}`, long, "<p>" + long},
		// One byte apart in the middle of a long run, and a first key whose
		// value differs before the one that matches.
		{`{"x":{"markdown":"` + plain[:500] + "X" + plain[501:] + `"},"markdown":"` + plain + `"}`, plain, ""},
		{`{"markdown":"` + plain + `x"}`, plain, ""},
	}...)
	for _, c := range seeds {
		got, want := CutDocument([]byte(c.raw), c.md, c.html), cutDocumentRef([]byte(c.raw), c.md, c.html)
		if !bytes.Equal(got, want) {
			t.Errorf("CutDocument(%q, %q, %q) = %q, want %q", c.raw, c.md, c.html, got, want)
		}
	}
}

// FuzzCutDocument: go test -fuzz FuzzCutDocument ./internal/archive/
func FuzzCutDocument(f *testing.F) {
	for _, c := range cutSeeds {
		f.Add([]byte(c.raw), c.md, c.html)
	}
	f.Fuzz(func(t *testing.T, raw []byte, md, html string) {
		if got, want := CutDocument(raw, md, html), cutDocumentRef(raw, md, html); !bytes.Equal(got, want) {
			t.Fatalf("CutDocument(%q, %q, %q) = %q, want %q", raw, md, html, got, want)
		}
	})
}
