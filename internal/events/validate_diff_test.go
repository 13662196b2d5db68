package events

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// sameVerdict fails unless Validate and validateReference (encoding/json
// into RawMessages) agree on body: both accept with the same Head, or both
// refuse naming the same field; and a body is accepted only if
// encoding/json finds it valid and it is UTF-8.
func sameVerdict(t *testing.T, body []byte) {
	t.Helper()
	got, err := Validate(body)
	want, wantErr := validateReference(body)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("Validate(%.200q) = %v, encoding/json-based reference = %v", body, err, wantErr)
	}
	if err == nil {
		if got != want {
			t.Fatalf("Validate(%.200q) Head = %+v, reference %+v", body, got, want)
		}
		if !json.Valid(body) || !utf8.Valid(body) {
			t.Fatalf("Validate accepted %.200q, which encoding/json refuses", body)
		}
		return
	}
	var ie, wie *InvalidError
	if !errors.As(err, &ie) || !errors.As(wantErr, &wie) {
		t.Fatalf("errors are not *InvalidError: %v / %v", err, wantErr)
	}
	if ie.Field != wie.Field {
		t.Fatalf("Validate(%.200q) names %q (%v), reference names %q (%v)", body, ie.Field, err, wie.Field, wantErr)
	}
	if ie.Field == "" && strings.Contains(wie.Reason, "UTF-8") != strings.Contains(ie.Reason, "UTF-8") {
		t.Fatalf("Validate(%.200q): %v, reference: %v", body, err, wantErr)
	}
}

// differentialSeeds are the fixtures and bodies at the edges of the
// grammar: nesting at and past encoding/json's limit, escapes, case-folded
// and repeated keys, numbers, whitespace.
func differentialSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"crawl-page.json", "crawl-page-failed.json", "crawl-completed.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", name))
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	const ok = `"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"`
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, s := range []string{
		`{` + ok + `,"data":[]}`,
		`{` + ok + `,"data":[{}, {"a":[1,2,{"b":null}]}]}`,
		`{` + ok + `,"data":[{}],"x":` + nest(9998) + `}`,
		`{` + ok + `,"data":[{}],"x":` + nest(9999) + `}`,
		`{` + ok + `,"data":[{}],"x":` + nest(10000) + `}`,
		`{` + ok + `,"data":[` + nest(9998) + `]}`,
		`{` + ok + `,"data":[` + nest(9999) + `]}`,
		`{` + ok + `,"data":[{}],"x":` + strings.Repeat(`{"a":`, 9999) + `1` + strings.Repeat(`}`, 9999) + `}`,
		`{` + ok + `,"data":[{}],"x":` + strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat(`}`, 10000) + `}`,
		`{` + ok + `,"DATA":[{}],"Type":"crawl.completed"}`,
		`{` + ok + `,"data":[{}],"data":"x"}`,
		`{` + ok + `,"data":"x","data":[{},1]}`,
		`{` + ok + `,"\u0064ata":[{}],"t\u0079pe":"a\u002eb"}`,
		`{` + ok + `,"data":[{}],"ſuccess":false,"\u212aey":1}`,
		`{"success":true,"type":"crawl\/page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","data":[]}`,
		`{` + ok + `,"data":[{}],"n":[-0,0.5e+10,1E-2,-12.25,1e999]}`,
		// Senders without webhookId, the v0 API's jobId, raw events.
		`{"success":true,"type":"crawl.page","jobId":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","data":[{"metadata":{"url":"u"}}]}`,
		`{"success":true,"type":"crawl.page","id":null,"JOBID":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":null,"data":[]}`,
		`{"success":true,"type":"crawl.started","id":5,"jobId":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","data":{}}`,
		`{"type":"monitor.page","id":"c","data":{"url":"u"}}`,
		`{"success":"x","type":"extract.completed","jobId":"` + strings.Repeat("é", 200) + `","data":5,"error":{},"metadata":[]}`,
		`{"type":"monitor.check.completed","webhookId":"x"}`,
		`{"type":"agent.completed","id":null,"jobId":7}`,
		`{"type":"agent.completed","id":"a\r\nNats-Msg-Id: x"}`,
		`{` + ok + `,"data":[{}],"n":01}`,
		`{` + ok + `,"data":[{}],"n":1.}`,
		`{` + ok + `,"data":[{}],"n":-}`,
		`{` + ok + `,"data":[{}],"s":"\ud800\u00e9\t"}`,
		`{` + ok + `,"data":[{}],"s":"a` + "\t" + `b"}`,
		`{` + ok + `,"data":[{}],"s":"\x"}`,
		" \t\n{" + ok + `,"data":[{}]} ` + "\r\n",
		"\u00a0{" + ok + `,"data":[{}]}` + "\u0085",
		`{` + ok + `,"data":[{}]}{}`,
		`{` + ok + `,"data":[{}],}`,
		`{` + ok + `,"data":[{},]}`,
		`{` + ok + `,"data":[{}],"error":null,"metadata":null}`,
		`{` + ok + `,"data":[{}],"s":"` + "\xff" + `"}`,
		`{` + ok + `,"data":[{}],` + "\xc3" + `}`,
		`{"x":"` + "\xed\xa0\x80" + `"}`,
		`{` + ok + `,"data":[{}],"t":tru}`,
		`{` + ok + `,"data":[{}],"t":nul`,
		// The page URL: case-folded and repeated metadata keys, escaped
		// url keys, empty and non-string values, nested metadata.
		`{` + ok + `,"data":[{"metadata":{"url":"https://a/"}}]}`,
		`{` + ok + `,"data":[{"metadata":{"sourceURL":"https://a/"}},{"metadata":{}}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":""}}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":"","sourceURL":"x"}}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":5,"sourceURL":["a"]}}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":"\u0000"}}]}`,
		`{` + ok + `,"data":[{"metadata":{"\u0075rl":"a"}}]}`,
		`{` + ok + `,"data":[{"metadata":{"URL":"a","SourceURL":"b"}}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":"a","url":""}}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":"","url":"a"}}]}`,
		`{` + ok + `,"data":[{"Metadata":{"url":"a"}}]}`,
		`{` + ok + `,"data":[{"METADATA":{"url":"a"},"metadata":null}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":"a"},"mEtAdAtA":"x"}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":"a"},"metadat\u0061":[]}]}`,
		`{` + ok + `,"data":[{"metadata":[],"metadata":{"sourceURL":"a"}}]}`,
		`{` + ok + `,"data":[{"markdown":5,"links":"x","metadata":{"url":"a","statusCode":"404"}}]}`,
		`{` + ok + `,"data":[{"x":{"metadata":{"url":"a"}}}]}`,
		`{` + ok + `,"data":[{"metadata":{"x":{"url":"a"}}}]}`,
		`{` + ok + `,"data":[{"metadata":{"url":"a"}}],"data":[{}]}`,
		`{` + ok + `,"data":[{}],"success":false}`,
		`{` + ok + `,"data":[{}],"type":"crawl.completed"}`,
		`{"success":true,"data":[{}],"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"}`,
		`{"a"`, `{"a":`, `{"a":1`, `{"a":"\u12`, `{`, `{}`, `{"data":[[[[`,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

func TestValidateAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range differentialSeeds(t) {
		sameVerdict(t, s)
	}
}

// FuzzValidateDifferential: on any input, the single-pass Validate and the
// encoding/json-based reference agree (go test -fuzz FuzzValidateDifferential).
func FuzzValidateDifferential(f *testing.F) {
	for _, s := range differentialSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameVerdict(t, body) })
}

// BenchmarkValidate: the single-pass Validate against the encoding/json
// reference on a ~5 KB delivery.
func BenchmarkValidate(b *testing.B) {
	body := []byte(`{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","data":[{"markdown":"` +
		strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 85) +
		`","metadata":{"title":"Bench","statusCode":200,"sourceURL":"https://example.com/"}}],"metadata":{"tenant":"bench"}}`)
	for _, bc := range []struct {
		name string
		fn   func([]byte) (Head, error)
	}{{"single-pass", Validate}, {"encoding-json", validateReference}} {
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
