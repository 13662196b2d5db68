package readercmd_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// longestURL is a URL of the longest length the archive serves by URL
// (8 KiB: internal/events accepts any length, the archive's read side
// refuses a url parameter beyond it), made of query parameters, whose
// every "&" the cursor's JSON writes as six bytes.
func longestURL(path string) string {
	u := "https://r.example/" + path + "?"
	for i := 0; len(u) < 8<<10-16; i++ {
		u += "a=b&"
	}
	return u + strings.Repeat("z", 8<<10-len(u))
}

// nextLink is the href of the rel=next link of a page, unescaped.
var nextLink = regexp.MustCompile(`<a rel="next" href="([^"]+)"`)

// The pages take back every next-page link they write, whatever the URL of
// the last item: search and a job's failures, a page at a time, each of
// whose last item has a URL of the longest length the archive serves.
func TestWebNextPageOfTheLongestURLs(t *testing.T) {
	t.Parallel()
	cfg, w := archiveDB(t)
	job := uuid.NewString()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	var pages, failed []string
	for i := range 3 {
		u := longestURL("page" + string(rune('a'+i)))
		pages = append(pages, u)
		deliver(t, w, pageBody(job, u, "Long", "quokka page", "<p>quokka</p>", 200), t0.Add(time.Duration(i)*time.Second))
		f := longestURL("failed" + string(rune('a'+i)))
		failed = append(failed, f)
		deliver(t, w, failureBody(job, f, "timeout"), t0.Add(time.Duration(10+i)*time.Second))
	}
	if len(pages[0]) != 8<<10 {
		t.Fatalf("the URL has %d bytes", len(pages[0]))
	}
	base := startReader(t, cfg, nil)

	for _, tc := range []struct {
		name, first string
		urls        []string
	}{
		{"search", "/ui/search?q=quokka&limit=1&job=" + job, pages},
		{"failures", "/ui/failures?limit=1&job=" + job, failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := 0
			path := tc.first
			for range 10 {
				resp, body := get(t, base+path, testToken)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %.200s… (%d bytes): %d\n%.2000s", path, len(path), resp.StatusCode, body)
				}
				for _, u := range tc.urls {
					if strings.Contains(html.UnescapeString(string(body)), u) {
						seen++
					}
				}
				m := nextLink.FindSubmatch(body)
				if m == nil {
					break
				}
				path = html.UnescapeString(string(m[1]))
			}
			if seen != len(tc.urls) {
				t.Fatalf("%d of the %d items seen through the next-page links", seen, len(tc.urls))
			}
		})
	}
}
