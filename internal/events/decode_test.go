package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
)

const testIDs = `"id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"`

// TestDecodeAcceptedLenient: a known field of an unexpected type costs that
// field only. Each body is accepted by Validate (the receiver answers 2xx),
// decodes without error, keeps the rest of the Document, and keeps data[0]
// as received in Raw.
func TestDecodeAcceptedLenient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc string
		check     func(*Document) bool
	}{
		{"markdown number", `{"markdown":5,"html":"<p>","metadata":{"url":"https://a/","title":"T"}}`,
			func(d *Document) bool { return d.Markdown == "" && d.HTML == "<p>" && d.Metadata.Title == "T" }},
		{"links string", `{"links":"x","markdown":"m","metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return d.Links == nil && d.Markdown == "m" }},
		{"links mixed", `{"links":["a",5],"markdown":"m","metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return d.Links == nil && d.Markdown == "m" }},
		{"actions array", `{"actions":[],"markdown":"m","metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return d.Actions == nil && d.Markdown == "m" }},
		{"actions nested wrong", `{"actions":{"screenshots":5},"markdown":"m","metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return d.Actions == nil && d.Markdown == "m" }},
		{"changeTracking string", `{"changeTracking":"x","markdown":"m","metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return d.ChangeTracking == nil && d.Markdown == "m" }},
		{"changeTracking diff number", `{"changeTracking":{"diff":1,"changeStatus":"new"},"metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return d.ChangeTracking == nil && d.Metadata.URL == "https://a/" }},
		{"every string a number", `{"markdown":1,"summary":2,"html":3,"rawHtml":4,"screenshot":5,"audio":6,"video":7,"answer":8,"highlights":9,"warning":10,"metadata":{"sourceURL":"https://a/"}}`,
			func(d *Document) bool {
				return reflect.DeepEqual(*d, Document{Metadata: Metadata{SourceURL: "https://a/"}, Raw: d.Raw})
			}},
		{"null fields", `{"markdown":null,"links":null,"actions":null,"metadata":{"url":"https://a/","title":null,"statusCode":null}}`,
			func(d *Document) bool { return d.Markdown == "" && d.Links == nil && d.Metadata.URL == "https://a/" }},
		{"case-folded key, wrong type elsewhere", `{"Markdown":"m","links":5,"metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return d.Markdown == "m" }},
		{"last of repeated keys", `{"markdown":"a","markdown":"b","links":5,"metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return d.Markdown == "b" }},
		{"metadata fields of other types", `{"metadata":{"url":"https://a/","concurrencyLimited":"yes","ogLocaleAlternate":5,"scrapeId":7,"statusCode":"200"}}`,
			func(d *Document) bool {
				return !d.Metadata.ConcurrencyLimited && d.Metadata.OGLocaleAlternate == nil && d.Metadata.ScrapeID == "7" && d.Metadata.StatusCode == 200
			}},
		{"branding anything", `{"branding":5,"metadata":{"url":"https://a/"}}`,
			func(d *Document) bool { return string(d.Branding) == "5" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(`{"success":true,"type":"crawl.page",` + testIDs + `,"data":[` + tc.doc + `],"metadata":{}}`)
			if _, err := Validate(body); err != nil {
				t.Fatalf("Validate refused: %v", err)
			}
			ev, err := DecodeAccepted(body)
			if err != nil {
				t.Fatalf("accepted, then not decoded: %v", err)
			}
			d := &ev.Data[0]
			if string(d.Raw) != tc.doc {
				t.Errorf("Raw %s, want %s", d.Raw, tc.doc)
			}
			if !tc.check(d) {
				t.Errorf("decoded %+v", *d)
			}
		})
	}
}

// TestDecodeAcceptedMetadataNotObject: a Document whose metadata is a
// string, an array or a number decodes with empty metadata, in a failed
// page (the only one Validate lets through without a URL).
func TestDecodeAcceptedMetadataNotObject(t *testing.T) {
	t.Parallel()
	for _, md := range []string{`"https://a/"`, `[]`, `[{"url":"x"}]`, `5`, `true`, `null`} {
		body := []byte(`{"success":false,"type":"crawl.page",` + testIDs + `,"data":[{"markdown":"m","metadata":` + md + `}],"error":"e"}`)
		if _, err := Validate(body); err != nil {
			t.Fatalf("metadata %s: Validate refused: %v", md, err)
		}
		ev, err := DecodeAccepted(body)
		if err != nil {
			t.Fatalf("metadata %s: %v", md, err)
		}
		if d := ev.Data[0]; d.Markdown != "m" || !reflect.DeepEqual(d.Metadata, Metadata{}) {
			t.Errorf("metadata %s: decoded %+v", md, d)
		}
	}
}

// TestDecodeAcceptedEnvelope: top-level fields the sink reads are lenient
// too (a body stored by an earlier receiver may not pass today's Validate);
// only what no delivery can be archived without fails.
func TestDecodeAcceptedEnvelope(t *testing.T) {
	t.Parallel()
	ev, err := DecodeAccepted([]byte(`{"success":"yes","type":"crawl.page",` + testIDs + `,"data":[],"error":5,"metadata":[1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Success || ev.Error != "" || ev.Type != TypeCrawlPage || string(ev.Metadata) != `[1]` {
		t.Errorf("decoded %+v", ev)
	}
	ev, err = DecodeAccepted([]byte(`{"success":true,"type":"crawl.completed",` + testIDs + `,"data":[],"error":"late","metadata":{"run":"x"}}`))
	if err != nil || !ev.Success || ev.Error != "late" || ev.ID != "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c" || string(ev.Metadata) != `{"run":"x"}` {
		t.Errorf("decoded %+v, %v", ev, err)
	}
	for _, body := range []string{
		`[]`, `{"type":5,` + testIDs + `,"data":[]}`, `{"type":"crawl.page","data":"x"}`, `{"type":"crawl.page","data":[1]}`,
	} {
		if _, err := DecodeAccepted([]byte(body)); err == nil {
			t.Errorf("DecodeAccepted(%s) succeeded", body)
		}
	}
}

// TestValidatePageURL: a successful page needs a URL, named in the error;
// a failed one, or another event type, does not.
func TestValidatePageURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, field string
	}{
		{"no metadata", `{"success":true,"type":"crawl.page",` + testIDs + `,"data":[{"markdown":"m"}]}`, "data[0].metadata"},
		{"empty url", `{"success":true,"type":"crawl.page",` + testIDs + `,"data":[{"metadata":{"url":"","sourceURL":""}}]}`, "data[0].metadata"},
		{"url a number", `{"success":true,"type":"crawl.page",` + testIDs + `,"data":[{"metadata":{"url":5}}]}`, "data[0].metadata"},
		{"metadata a string", `{"success":true,"type":"crawl.page",` + testIDs + `,"data":[{"metadata":"https://a/"}]}`, "data[0].metadata"},
		{"second document", `{"success":true,"type":"crawl.page",` + testIDs + `,"data":[{"metadata":{"url":"https://a/"}},{"metadata":{"title":"t"}}]}`, "data[1].metadata"},
		{"success after data", `{"type":"crawl.page",` + testIDs + `,"data":[{}],"success":true}`, "data[0].metadata"},
		{"url", `{"success":true,"type":"crawl.page",` + testIDs + `,"data":[{"metadata":{"url":"https://a/"}}]}`, ""},
		{"sourceURL", `{"success":true,"type":"crawl.page",` + testIDs + `,"data":[{"metadata":{"sourceURL":"https://a/"}}]}`, ""},
		{"escaped key", `{"success":true,"type":"crawl.page",` + testIDs + `,"data":[{"Metadata":{"\u0075rl":"https://a/"}}]}`, ""},
		{"failed page without url", `{"success":false,"type":"crawl.page",` + testIDs + `,"data":[{}],"error":"e"}`, ""},
		{"failed page, data empty", `{"success":false,"type":"crawl.page",` + testIDs + `,"data":[],"error":"e"}`, ""},
		{"crawl.completed", `{"success":true,"type":"crawl.completed",` + testIDs + `,"data":[]}`, ""},
		{"crawl.started with a document", `{"success":true,"type":"crawl.started",` + testIDs + `,"data":[{}]}`, ""},
		{"batch_scrape.page", `{"success":true,"type":"batch_scrape.page",` + testIDs + `,"data":[{}]}`, "data[0].metadata"},
		{"batch_scrape.page with url", `{"success":true,"type":"batch_scrape.page",` + testIDs + `,"data":[{"metadata":{"sourceURL":"https://x/"}}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Validate([]byte(tc.body))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field || err.Error() != tc.field+": needs url or sourceURL" {
				t.Fatalf("Validate = %v, want %s: needs url or sourceURL", err, tc.field)
			}
			if _, rerr := validateReference([]byte(tc.body)); rerr == nil || rerr.Error() != err.Error() {
				t.Errorf("reference says %v", rerr)
			}
		})
	}
}

// TestStatusClamp: the one clamp, for Metadata decoded and built in code.
func TestStatusClamp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code, want int
	}{{200, 200}, {404, 404}, {0, 0}, {65535, 65535}, {65536, 0}, {70000, 0}, {-1, 0}, {-70000, 0}, {1 << 62, 0}} {
		m := Metadata{StatusCode: tc.code}
		if got := m.Status(); got != tc.want {
			t.Errorf("Status(%d) = %d, want %d", tc.code, got, tc.want)
		}
		failed, reason := Failure(&Event{Success: true}, &Document{Metadata: m})
		if failed != (tc.want >= 400) || failed && reason != "HTTP "+strconv.Itoa(tc.want) {
			t.Errorf("Failure with status %d = %v %q", tc.code, failed, reason)
		}
	}
	var m Metadata
	if err := json.Unmarshal([]byte(`{"statusCode":70000}`), &m); err != nil || m.StatusCode != 0 {
		t.Errorf("decoded 70000 as %d (%v)", m.StatusCode, err)
	}
}
