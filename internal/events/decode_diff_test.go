package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameDecoding fails unless DecodeAccepted (the scanner's path) and
// decodeWhole (encoding/json over the whole body) give the same Event, or
// both refuse the body.
func sameDecoding(t *testing.T, body []byte) {
	t.Helper()
	got, err := DecodeAccepted(body)
	want, wantErr := decodeWhole(body)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("DecodeAccepted(%.200q) error %v, decodeWhole %v", body, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeAccepted(%.200q) =\n%+v\ndecodeWhole =\n%+v", body, got, want)
	}
}

// realDeliveries are the bodies the real sender delivered in the captured
// runs, and the fixtures.
func realDeliveries(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, pattern := range []string{"firecrawl-2026/run*/*.body", "*.json", "firecrawl-*/[0-9]*.body"} {
		names, err := filepath.Glob(filepath.Join("..", "..", "testdata", "fixtures", pattern))
		if err != nil || len(names) == 0 {
			tb.Fatalf("no fixtures match %s (%v)", pattern, err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}

func TestDecodeAcceptedAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range append(differentialSeeds(t), realDeliveries(t)...) {
		sameDecoding(t, s)
	}
}

// TestDecodeAcceptedScansRealDeliveries: every body the receiver accepts
// of the real sender's takes the scanner's path, not only the bodies it
// falls back for.
func TestDecodeAcceptedScansRealDeliveries(t *testing.T) {
	t.Parallel()
	n := 0
	for _, body := range realDeliveries(t) {
		if _, err := Validate(body); err != nil {
			continue
		}
		n++
		ev, ok := decodeScanned(body)
		if !ok {
			t.Fatalf("an accepted delivery was decoded whole, not scanned: %.300s", body)
		}
		if ev.Type == "" || (ev.IsPage() && len(ev.Data) == 0) {
			t.Fatalf("scanned %.200q into %+v", body, ev)
		}
	}
	if n < 10 {
		t.Fatalf("only %d accepted real deliveries", n)
	}
}

// Bodies the scanner must leave to encoding/json, each for its reason.
func TestDecodeAcceptedFallsBack(t *testing.T) {
	t.Parallel()
	const ok = `"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"`
	for _, body := range []string{
		`{` + ok + `,"data":[{"markdown":"a"}],"data":[{"markdown":"b"}]}`, // a key twice: the last wins
		`{` + ok + `,"data":[{"markdown":"` + "\xff" + `"}]}`,              // not UTF-8
		`{` + ok + `,"data":[null,{"markdown":"b"}]}`,                      // not an object
		`{` + ok + `,"data":{"markdown":"b"}}`,                             // not an array
		`{"success":true,"data":[]}`,                                       // no type
	} {
		if _, ok := decodeScanned([]byte(body)); ok {
			t.Errorf("decodeScanned took %q", body)
		}
		sameDecoding(t, []byte(body))
	}
	ev, err := DecodeAccepted([]byte(`{` + ok + `,"data":[{"markdown":"a"}],"data":[{"markdown":"b"}]}`))
	if err != nil || len(ev.Data) != 1 || ev.Data[0].Markdown != "b" {
		t.Fatalf("repeated data: %+v, %v; want the last one", ev, err)
	}
}

// FuzzDecodeAcceptedDifferential: on any input, the scanner's path and
// encoding/json over the whole body decode the same Event
// (go test -fuzz FuzzDecodeAcceptedDifferential ./internal/events/).
func FuzzDecodeAcceptedDifferential(f *testing.F) {
	for _, s := range append(differentialSeeds(f), realDeliveries(f)...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameDecoding(t, body) })
}

// BenchmarkDecodeAccepted: DecodeAccepted against encoding/json alone (the
// body and every Document decoded by it, as the sink did before), on a page delivery of the real sender's shape with a 10 kB
// markdown and a 25 kB html (the archive benchmark's mean page).
func BenchmarkDecodeAccepted(b *testing.B) {
	var real []byte
	for _, body := range realDeliveries(b) {
		if bytes.Contains(body, []byte(`"type":"crawl.page"`)) && bytes.Contains(body, []byte(`"markdown":"`)) {
			real = body
			break
		}
	}
	if real == nil {
		b.Fatal("no real crawl.page delivery with markdown")
	}
	md := strings.Repeat("A paragraph of *markdown* with a [link](https://example.com/a) and \"quotes\".\n", 125)
	html := strings.Repeat(`<p class="x">A paragraph of <em>html</em> with a <a href="https://example.com/a">link</a>.</p>`+"\n", 270)
	body := bytes.Replace(real, []byte(`"markdown":"`), fmt.Appendf(nil, `"html":%q,"markdown":"%s`, html, strings.ReplaceAll(strings.ReplaceAll(md, "\"", `\"`), "\n", `\n`)), 1)
	if _, err := Validate(body); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		fn   func([]byte) (*Event, error)
	}{{"scanned", DecodeAccepted}, {"encoding-json-only", decodeEncodingJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.fn(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// wholeDocument is a Document that encoding/json decodes whole.
type wholeDocument Document

func (d *wholeDocument) UnmarshalJSON(b []byte) error { return (*Document)(d).unmarshalWhole(b) }

// decodeEncodingJSON is DecodeAccepted done by encoding/json alone.
func decodeEncodingJSON(body []byte) (*Event, error) {
	var w struct {
		wireEvent
		Data []wholeDocument `json:"data"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	ev := &Event{Type: stringOnly(w.Type), Data: make([]Document, len(w.Data))}
	for i := range w.Data {
		ev.Data[i] = Document(w.Data[i])
	}
	return ev, nil
}
