package replaytest_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/replaytest"
	"github.com/google/uuid"
	"github.com/nlnwa/gowarc/v3"
)

// TestReplay: a WARC of a good page, a 404 page and two captures of one
// URL, replayed in ReplayWeb.page, as a WARC and inside a WACZ with its
// CDXJ index: each URL shows its own html with its own status, a
// timestamp picks its capture, and a URL the archive does not hold is the
// tool's 404, not a page.
func TestReplay(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	captures := []capture{
		{"https://replay.example/a", t0, 200, "<p>alpha marker</p>"},
		{"https://replay.example/gone", t0, 404, "<p>gone marker</p>"},
		{"https://replay.example/twice", t0, 200, "<p>first capture</p>"},
		{"https://replay.example/twice", t0.Add(time.Hour), 200, "<p>second capture</p>"},
	}
	warc, index := warcOf(t, captures...)
	for _, file := range []struct {
		name string
		body []byte
	}{
		{"test.warc", warc},
		{"test.wacz", waczOf(t, warc, index, captures)},
	} {
		t.Run(file.name, func(t *testing.T) {
			t.Parallel()
			r := replaytest.Start(t, file.name, file.body)
			for _, tc := range []struct {
				name, url, ts string
				status        int
				text          string
			}{
				{"good page", "https://replay.example/a", "", 200, "alpha marker"},
				{"404 page", "https://replay.example/gone", "", 404, "gone marker"},
				{"first capture", "https://replay.example/twice", "20261120100000", 200, "first capture"},
				{"second capture", "https://replay.example/twice", "20261120110000", 200, "second capture"},
			} {
				got := r.Open(t, tc.url, tc.ts)
				if got.Status != tc.status || strings.TrimSpace(got.Text) != tc.text {
					t.Errorf("%s: %s replays %d %q, want %d %q (at %s)", tc.name, tc.url, got.Status, got.Text, tc.status, tc.text, got.Location)
				}
				if !strings.Contains(got.Location, tc.url) {
					t.Errorf("%s: replayed at %s", tc.name, got.Location)
				}
			}
			missing := r.Open(t, "https://replay.example/never", "")
			if missing.Status != 404 || strings.Contains(missing.Text, "marker") {
				t.Errorf("a URL not in the archive replays %d %q", missing.Status, missing.Text)
			}
		})
	}
}

// capture is one response record.
type capture struct {
	url  string
	at   time.Time
	code int
	html string
}

// warcOf is an uncompressed WARC of captures, one response record each,
// and its CDXJ index (a line per record, in the order of its keys).
func warcOf(t *testing.T, captures ...capture) ([]byte, []string) {
	t.Helper()
	var buf bytes.Buffer
	var index []string
	m := gowarc.NewMarshaler()
	for _, c := range captures {
		rb := gowarc.NewRecordBuilder(gowarc.Response, gowarc.WithStrictValidation(), gowarc.WithAddMissingDigest(true))
		rb.AddWarcHeader(gowarc.WarcRecordID, "<urn:uuid:"+uuid.NewString()+">")
		rb.AddWarcHeaderTime(gowarc.WarcDate, c.at)
		rb.AddWarcHeader(gowarc.WarcTargetURI, c.url)
		rb.AddWarcHeader(gowarc.ContentType, "application/http; msgtype=response")
		head := "HTTP/1.1 " + strconv.Itoa(c.code) + " X\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(c.html)) + "\r\n\r\n"
		if _, err := rb.WriteString(head + c.html); err != nil {
			t.Fatal(err)
		}
		rec, _, err := rb.Build()
		if err != nil {
			t.Fatal(err)
		}
		offset := buf.Len()
		if _, _, err := m.Marshal(&buf, rec, 0); err != nil {
			t.Fatal(err)
		}
		rec.Close()
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		labels := strings.Split(u.Hostname(), ".")
		slices.Reverse(labels)
		fields, _ := json.Marshal(map[string]string{"url": c.url, "mime": "text/html", "status": strconv.Itoa(c.code),
			"offset": strconv.Itoa(offset), "length": strconv.Itoa(buf.Len() - offset), "filename": "data.warc"})
		index = append(index, strings.Join(labels, ",")+")"+u.Path+" "+c.at.Format("20060102150405")+" "+string(fields))
	}
	slices.Sort(index)
	return buf.Bytes(), index
}

// waczOf is a WACZ 1.1.1 of warc: the WARC (stored, so that the tool
// reads its records by range), its CDXJ index, the pages and the package
// descriptor with each file's digest.
func waczOf(t *testing.T, warc []byte, index []string, captures []capture) []byte {
	t.Helper()
	pages := `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}` + "\n"
	for _, c := range captures {
		line, _ := json.Marshal(map[string]string{"url": c.url, "ts": c.at.Format(time.RFC3339), "title": c.url})
		pages += string(line) + "\n"
	}
	files := []struct {
		path string
		body []byte
	}{
		{"archive/data.warc", warc},
		{"indexes/index.cdxj", []byte(strings.Join(index, "\n") + "\n")},
		{"pages/pages.jsonl", []byte(pages)},
	}
	var resources []map[string]any
	for _, f := range files {
		sum := sha256.Sum256(f.body)
		resources = append(resources, map[string]any{"name": path.Base(f.path), "path": f.path, "hash": "sha256:" + hex.EncodeToString(sum[:]), "bytes": len(f.body)})
	}
	pkg, _ := json.Marshal(map[string]any{"profile": "data-package", "wacz_version": "1.1.1", "resources": resources})
	files = append(files, struct {
		path string
		body []byte
	}{"datapackage.json", pkg})
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.path, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
