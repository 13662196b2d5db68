package replaytest_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/replaytest"
	"github.com/google/uuid"
	"github.com/nlnwa/gowarc/v3"
)

// TestReplay: a WARC of a good page, a 404 page and two captures of one
// URL, replayed in ReplayWeb.page: each URL shows its own html with its
// own status, a timestamp picks its capture, and a URL the archive does
// not hold is the tool's 404, not a page.
func TestReplay(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	warc := warcOf(t,
		capture{"https://replay.example/a", t0, 200, "<p>alpha marker</p>"},
		capture{"https://replay.example/gone", t0, 404, "<p>gone marker</p>"},
		capture{"https://replay.example/twice", t0, 200, "<p>first capture</p>"},
		capture{"https://replay.example/twice", t0.Add(time.Hour), 200, "<p>second capture</p>"},
	)
	r := replaytest.Start(t, "test.warc", warc)
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
}

// capture is one response record.
type capture struct {
	url  string
	at   time.Time
	code int
	html string
}

// warcOf is an uncompressed WARC of captures, one response record each.
func warcOf(t *testing.T, captures ...capture) []byte {
	t.Helper()
	var buf bytes.Buffer
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
		if _, _, err := m.Marshal(&buf, rec, 0); err != nil {
			t.Fatal(err)
		}
		rec.Close()
	}
	return buf.Bytes()
}
