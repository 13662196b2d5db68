package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// sameDocument fails unless UnmarshalJSON (lifting the large strings) and
// unmarshalWhole (encoding/json over the whole Document) agree on b.
func sameDocument(t *testing.T, b []byte) {
	t.Helper()
	var got, want Document
	err := got.UnmarshalJSON(b)
	wantErr := want.unmarshalWhole(b)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("UnmarshalJSON(%.200q) error %v, encoding/json %v", b, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("UnmarshalJSON(%.300q) =\n%+v\nencoding/json =\n%+v", b, got, want)
	}
}

// documentSeeds are the Documents of the real deliveries and Documents at
// the edges of lifting: every escape, surrogate pairs and lone halves,
// keys repeated or in another case, strings of other types.
func documentSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, body := range realDeliveries(tb) {
		var w struct{ Data []json.RawMessage }
		if json.Unmarshal(body, &w) == nil {
			for _, d := range w.Data {
				out = append(out, d)
			}
		}
	}
	long := strings.Repeat("page text ", 40)
	for _, s := range []string{
		`{"markdown":"` + long + `"}`,
		`{"markdown":"` + long + `\n\t\r\b\f\"\\\/ \u00e9\u20ac\ud83d\ude00 end","html":"<p>` + long + `</p>","metadata":{"sourceURL":"https://a/"}}`,
		`{"markdown":"` + long + `\ud800 lone high, \udc00 lone low, \ud800\u0041 high then not low, \ud800\ud800\udc00"}`,
		`{"markdown":"` + long + `\u0000\u001f\uFFFF\uFEFF"}`,
		`{"markdown":"` + long + `", "markdown":"` + long + `x"}`,
		`{"markdown":"` + long + `", "Markdown":"x"}`,
		`{"MARKDOWN":"` + long + `"}`,
		`{"m\u0061rkdown":"` + long + `"}`,
		`{"markdown":5, "html":"` + long + `"}`,
		`{"markdown":"` + long + `", "links":"not a list"}`,
		`{"markdown":"` + long + `", "metadata":{"statusCode":"404","title":["x"]}}`,
		`{"markdown":"` + long + `", "rawHtml":"` + long + `", "screenshot":"` + long + `", "summary":"` + long + `", "warning":null}`,
		`{"markdown":"` + long + "\xff" + `"}`,
		`{"markdown":"` + long + `"} `,
		`{"html":"` + long + `","actions":{"scrapes":[{"url":"u","html":"` + long + `"}]},"changeTracking":{"diff":"` + long + `"}}`,
		`{"markdown":null,"html":"` + long + `"}`,
		`[` + `"` + long + `"]`,
		// The metadata decodeDirect reads, and the values it leaves.
		`{"markdown":"` + long + `","metadata":{"title":"T\u00e9 \"q\"","sourceURL":5,"url":null,"statusCode":404.7,"og:title":"x","keywords":["a","b"],"concurrencyLimited":true,"concurrencyQueueDurationMs":12.9,"scrapeId":"s","error":{"a":1}}}`,
		`{"markdown":"` + long + `","metadata":{"statusCode":"503","concurrencyLimited":null,"concurrencyQueueDurationMs":"7","description":false,"language":1e400}}`,
		`{"markdown":"` + long + `","metadata":{"statusCode":1e400,"concurrencyQueueDurationMs":1e300,"contentType":"text/html"}}`,
		`{"markdown":"` + long + `","metadata":{"title":"a","title":"b"}}`,
		`{"markdown":"` + long + `","metadata":{"concurrencyLimited":true,"concurrencyLimited":null}}`,
		`{"markdown":"` + long + `","metadata":{"t\u0069tle":"escaped key","og\u003atitle":"x"}}`,
		`{"markdown":"` + long + `","metadata":null}`,
		`{"markdown":"` + long + `","metadata":"not an object"}`,
		`{"markdown":"` + long + `","metadata":{}, "metadata":{"title":"twice"}}`,
		`{"markdown":"` + long + `","Metadata":{"title":"other case"}}`,
		"{\"markdown\":\"" + long + "\",\"lin\u212as\":[\"kelvin\"]}",
		`{"markdown":"` + long + `","unknown":{"deep":[1,2,{"x":null}]},"metadata":{"sourceURL":"https://a/","statusCode":200}}`,
		`{"markdown":"` + long + `","links":["https://a/"]}`,
	} {
		out = append(out, []byte(s))
	}
	return out
}

func TestDocumentLiftingAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	seeds := documentSeeds(t)
	lifted := 0
	for _, s := range seeds {
		sameDocument(t, s)
		if _, ok := decodeLifted(s); ok {
			lifted++
		}
	}
	// The point is to take the fast path: the real Documents and most
	// seeds do.
	if lifted < len(seeds)/2 {
		t.Fatalf("only %d of %d Documents lifted", lifted, len(seeds))
	}
}

// TestDocumentDirectTakesRealDocuments: the Documents of the real deliveries
// are decoded without encoding/json (decodeDirect), not left to it.
func TestDocumentDirectTakesRealDocuments(t *testing.T) {
	t.Parallel()
	n := 0
	for _, body := range realDeliveries(t) {
		var w struct{ Data []json.RawMessage }
		if json.Unmarshal(body, &w) != nil {
			continue
		}
		for _, d := range w.Data {
			if len(d) < liftAtLeast || bytes.Contains(d, []byte(`"links"`)) || bytes.Contains(d, []byte(`"actions"`)) ||
				bytes.Contains(d, []byte(`"changeTracking"`)) || bytes.Contains(d, []byte(`"branding"`)) {
				continue
			}
			n++
			if _, ok := decodeDirect(d); !ok {
				t.Errorf("decodeDirect left a real Document to encoding/json: %.300s", d)
			}
		}
	}
	if n == 0 {
		t.Fatal("no real Document to decode")
	}
	t.Logf("%d real Documents decoded directly", n)
}

// FuzzDocumentDifferential: on any input, lifting and encoding/json decode
// the same Document (go test -fuzz FuzzDocumentDifferential ./internal/events/).
func FuzzDocumentDifferential(f *testing.F) {
	for _, s := range documentSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameDocument(t, b) })
}
