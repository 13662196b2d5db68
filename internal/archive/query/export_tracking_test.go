package query

import (
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// TestWithTracking: an NDJSON line gains the object as its first member,
// after what the buffer already holds, whatever the Document's size; a
// Document with its own changeTracking (the crawl API's, sent with a crawl
// that asked for it) and a row that is no JSON object are left as they
// are.
func TestWithTracking(t *testing.T) {
	t.Parallel()
	ct := events.ChangeTracking{ChangeStatus: events.ChangeNew, Visibility: events.VisibilityVisible}
	const obj = `"changeTracking":{"previousScrapeAt":null,"changeStatus":"new","visibility":"visible"}`
	for _, tc := range []struct{ name, cut, content, want string }{
		{"markdown and html", "{\"markdown\":\x01,\"html\":\x02,\"metadata\":{}}", "md<p>h</p>", `{` + obj + `,"markdown":"md","html":"<p>h</p>","metadata":{}}`},
		{"empty object", `{}`, "", `{` + obj + `}`},
		{"its own kept", "{\"markdown\":\x01,\"changeTracking\":{\"changeStatus\":\"same\"}}", "md", `{"markdown":"md","changeTracking":{"changeStatus":"same"}}`},
		{"no object", `["x"]`, "", `["x"]`},
		{"no JSON", "{\"markdown\":\x01", "md", `{"markdown":"md"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte("previous line\n")
			start := len(b)
			b = archive.AppendDocument(b, tc.cut, tc.content, 2)
			b = withTracking(b, start, tc.cut, ct)
			if got := string(b[start:]); got != tc.want || string(b[:start]) != "previous line\n" {
				t.Errorf("got %q\nwant %q", b, tc.want)
			}
		})
	}
}
