package events_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/trackingtest"
)

// TestTrackingDiffFixture: the diff of the fixture's two markdowns is the
// crawl API's, byte for byte: the text (header lines, hunk line, the
// no-newline marker) and its parsed form (keys, their order, line
// numbers).
func TestTrackingDiffFixture(t *testing.T) {
	t.Parallel()
	d, err := events.NewTrackingDiff(string(trackingtest.Fixture(t, "previous.md")), string(trackingtest.Fixture(t, "current.md")))
	if err != nil || d == nil {
		t.Fatalf("diff = %v, %v", d, err)
	}
	var want events.ChangeTracking
	if err := json.Unmarshal(trackingtest.Fixture(t, "changed.json"), &want); err != nil {
		t.Fatal(err)
	}
	if d.Text != want.Diff.Text {
		t.Errorf("text:\n%q\nwant\n%q", d.Text, want.Diff.Text)
	}
	got, _ := json.Marshal(d.JSON)
	var fixture struct {
		Diff struct{ JSON json.RawMessage } `json:"diff"`
	}
	if err := json.Unmarshal(trackingtest.Fixture(t, "changed.json"), &fixture); err != nil {
		t.Fatal(err)
	}
	if compact := compactJSON(t, fixture.Diff.JSON); string(got) != compact {
		t.Errorf("json:\n%s\nwant\n%s", got, compact)
	}
	ct := events.ChangeTracking{PreviousScrapeAt: want.PreviousScrapeAt, ChangeStatus: events.ChangeChanged, Visibility: events.VisibilityVisible, Diff: d}
	b, _ := json.Marshal(ct)
	trackingtest.CheckShape(t, b, "changed.json")
	n, _ := json.Marshal(events.ChangeTracking{ChangeStatus: events.ChangeNew, Visibility: events.VisibilityVisible})
	trackingtest.CheckShape(t, n, "new.json")
}

func compactJSON(t *testing.T, b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestTrackingDiffCases: hunks as the crawl API writes them for the edges
// of a text: an empty previous text, an added last line, texts equal.
func TestTrackingDiffCases(t *testing.T) {
	t.Parallel()
	const head = "===================================================================\n--- previous.md\t\n+++ current.md\t\n"
	for _, tc := range []struct{ name, prev, cur, want string }{
		{"from empty", "", "a\nb\n", head + "@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty", "a\n", "", head + "@@ -1,1 +0,0 @@\n-a\n"},
		{"line added at the end", "a\nb\n", "a\nb\nc\n", head + "@@ -1,2 +1,3 @@\n a\n b\n+c\n"},
		{"last line changed, no newline", "a\nb", "a\nc", head + "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"equal", "a\nb", "a\nb", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := events.NewTrackingDiff(tc.prev, tc.cur)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if d != nil {
				got = d.Text
			}
			if got != tc.want {
				t.Errorf("text:\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestTrackingDiffBounded: a diff past MaxTrackingDiff is an error, not a
// body of any size.
func TestTrackingDiffBounded(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("x", 1000) + "\n"
	var prev, cur strings.Builder
	for i := 0; i < 2*events.MaxTrackingDiff/len(line); i++ {
		prev.WriteString("a" + line)
		cur.WriteString("b" + line)
	}
	if d, err := events.NewTrackingDiff(prev.String(), cur.String()); err == nil {
		t.Fatalf("diff of %d bytes: no error", len(d.Text))
	}
}

// TestDecodeSentChangeTracking: a Document that carries the crawl API's own
// changeTracking (a crawl that asked for it) keeps it as the object it is,
// diff and all; it was once typed as a string and dropped on the lenient
// path.
func TestDecodeSentChangeTracking(t *testing.T) {
	t.Parallel()
	sent := compactJSON(t, trackingtest.Fixture(t, "changed.json"))
	body := `{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",` +
		`"data":[{"markdown":"m","metadata":{"url":"https://a/","statusCode":200},"changeTracking":` + sent + `}]}`
	ev, err := events.DecodeAccepted([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ct := ev.Data[0].ChangeTracking
	if ct == nil || ct.Diff == nil {
		t.Fatalf("changeTracking = %+v, want the object sent", ct)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ct); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(buf.String()); got != sent {
		t.Errorf("decoded and written again:\n%s\nwant as sent\n%s", got, sent)
	}
}
