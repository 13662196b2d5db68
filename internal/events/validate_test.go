package events

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFixturesValid: every delivery the real sender makes passes, the failed
// page (a Document with no content) included.
func TestFixturesValid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file    string
		want    Head
		failure bool
	}{
		{"crawl-page.json", Head{Type: TypeCrawlPage, CrawlID: "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", WebhookID: "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", Success: true, Documents: 1}, false},
		{"crawl-page-failed.json", Head{Type: TypeCrawlPage, CrawlID: "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", WebhookID: "3b2f1c9e-8d7a-4c6b-9e5f-0a1b2c3d4e5f", Success: false, Documents: 1}, true},
		{"crawl-completed.json", Head{Type: TypeCrawlCompleted, CrawlID: "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", WebhookID: "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", Success: true, Documents: 0}, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			body := readFixture(t, tc.file)
			h, err := Validate(body)
			if err != nil {
				t.Fatal(err)
			}
			if h != tc.want {
				t.Errorf("Head = %+v, want %+v", h, tc.want)
			}
			ev, err := Decode(body)
			if err != nil {
				t.Fatal(err)
			}
			if len(ev.Data) > 0 {
				if failed, _ := Failure(ev, &ev.Data[0]); failed != tc.failure {
					t.Errorf("Failure = %v, want %v", failed, tc.failure)
				}
			}
		})
	}
}

// TestDocumentKeepsUnknownFields: a Document encodes back to the bytes it
// was decoded from, unknown metadata (proxyUsed, cacheState) included.
func TestDocumentKeepsUnknownFields(t *testing.T) {
	t.Parallel()
	ev, err := Decode(readFixture(t, "crawl-page.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc := ev.Data[0]
	if doc.Metadata.ScrapeID != "7c9e6679-7425-40de-944b-e07fc1f90ae7" || doc.Metadata.PageURL() != "https://example.com/" {
		t.Errorf("metadata %+v", doc.Metadata)
	}
	if string(doc.Metadata.Extra["proxyUsed"]) != `"basic"` {
		t.Errorf("extra %v", doc.Metadata.Extra)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readFixture(t, "crawl-page.json"), out) {
		t.Errorf("re-encoded Document differs: %s", out)
	}
	doc.Raw = nil
	out, _ = json.Marshal(doc)
	var again Document
	if err := json.Unmarshal(out, &again); err != nil || string(again.Metadata.Extra["cacheState"]) != `"miss"` {
		t.Errorf("typed round trip lost extra metadata: %s", out)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	const ids = `"id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"`
	for _, tc := range []struct {
		name, body, field string
	}{
		{"empty", ``, ""},
		{"array", `[]`, ""},
		{"not JSON", `{"success":`, ""},
		{"success missing", `{"type":"crawl.page",` + ids + `,"data":[]}`, "success"},
		{"success string", `{"success":"true","type":"crawl.page",` + ids + `,"data":[]}`, "success"},
		{"type missing", `{"success":true,` + ids + `,"data":[]}`, "type"},
		{"type number", `{"success":true,"type":1,` + ids + `,"data":[]}`, "type"},
		{"type empty", `{"success":true,"type":"",` + ids + `,"data":[]}`, "type"},
		{"type with space", `{"success":true,"type":"crawl page",` + ids + `,"data":[]}`, "type"},
		{"type with wildcard", `{"success":true,"type":"crawl.>",` + ids + `,"data":[]}`, "type"},
		{"type empty part", `{"success":true,"type":"crawl..page",` + ids + `,"data":[]}`, "type"},
		{"id missing", `{"success":true,"type":"crawl.page","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","data":[]}`, "id"},
		{"id not UUID", `{"success":true,"type":"crawl.page","id":"123","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","data":[]}`, "id"},
		{"webhookId braces", `{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"{0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d}","data":[]}`, "webhookId"},
		{"data missing", `{"success":true,"type":"crawl.page",` + ids + `}`, "data"},
		{"data object", `{"success":true,"type":"crawl.page",` + ids + `,"data":{}}`, "data"},
		{"data of strings", `{"success":true,"type":"crawl.page",` + ids + `,"data":["x"]}`, "data[0]"},
		{"error number", `{"success":false,"type":"crawl.page",` + ids + `,"data":[],"error":5}`, "error"},
		{"metadata string", `{"success":true,"type":"crawl.page",` + ids + `,"data":[],"metadata":"x"}`, "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Validate([]byte(tc.body))
			var ie *InvalidError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ie) {
				t.Fatalf("Validate = %v, want an *InvalidError", err)
			}
			if ie.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", ie.Field, tc.field, err)
			}
		})
	}
}

func TestUUIDCanonical(t *testing.T) {
	t.Parallel()
	h, err := Validate([]byte(`{"success":true,"type":"crawl.page","id":"5F0B6F3E-2C1D-4A8E-9B7A-1D2E3F4A5B6C","webhookId":"0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D","data":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if h.WebhookID != "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d" || h.CrawlID != "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c" {
		t.Errorf("ids not canonical: %+v", h)
	}
}

// FuzzValidate: Validate never panics; what it accepts has UUID ids, a
// subject-safe type, and decodes as an Event.
func FuzzValidate(f *testing.F) {
	for _, name := range []string{"crawl-page.json", "crawl-page-failed.json", "crawl-completed.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"success":true,"type":"a..b","id":"x","webhookId":"y","data":[1]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := Validate(body)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if len(h.WebhookID) != 36 || h.Type == "" || checkType(h.Type) != nil {
			t.Fatalf("accepted a bad head: %+v", h)
		}
		if ClassOf(h.Type) == ClassRaw {
			// Any other type is kept whole (the archive's events table),
			// its job id only as far as the body names one.
			if len(h.CrawlID) > MaxJobIDLength {
				t.Fatalf("raw event's job id over %d bytes: %+v", MaxJobIDLength, h)
			}
			return
		}
		if len(h.CrawlID) != 36 {
			t.Fatalf("accepted a bad head: %+v", h)
		}
		if _, err := Decode(body); err != nil {
			t.Fatalf("Validate accepted what Decode refuses: %v", err)
		}
	})
}

// TestNeedsAttention: the eight-bytes-at-a-time check agrees with the
// byte table, for every byte value at every position and for random words.
func TestNeedsAttention(t *testing.T) {
	word := func(b [8]byte) uint64 { return binary.LittleEndian.Uint64(b[:]) }
	want := func(b [8]byte) bool {
		for _, c := range b {
			if !plain[c] {
				return true
			}
		}
		return false
	}
	for c := range 256 {
		for pos := range 8 {
			b := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			b[pos] = byte(c)
			if got := needsAttention(word(b)); got != want(b) {
				t.Fatalf("byte %#x at %d: %v, want %v", c, pos, got, want(b))
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		var b [8]byte
		for k := range b {
			// Mostly plain bytes, with the edges of each class.
			b[k] = []byte{' ', '!', '#', '[', ']', '~', 0x7f, 0x1f, 0x80, 0xff, '"', '\\', 0, 'z'}[rng.IntN(14)]
			if rng.IntN(3) == 0 {
				b[k] = byte(rng.IntN(256))
			}
		}
		if got := needsAttention(word(b)); got != want(b) {
			t.Fatalf("%q: %v, want %v", b[:], got, want(b))
		}
	}
}
