package events

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// captures are the real sender's deliveries (testdata/fixtures/firecrawl-2026).
const captures = "../../testdata/fixtures/firecrawl-2026"

func readCapture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(captures, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cancelledNow is the cancellation error the 2026 API sends.
var cancelledNow = cancellationErrors[0]

// TestFailureRulesOnCaptures: every page delivery the real API sent is
// classified by its own signals: the 404 pages (success true, statusCode
// 404) and the scrape that failed (success false) are failures, every other
// page is not.
func TestFailureRulesOnCaptures(t *testing.T) {
	t.Parallel()
	failed := map[string]string{
		"run1/0042-crawl.page.body": "HTTP 404",
		"run2/0042-crawl.page.body": "HTTP 404",
		"run2/0043-crawl.page.body": "All scraping engines failed to retrieve content from this URL.",
	}
	paths, err := filepath.Glob(filepath.Join(captures, "run*", "*-crawl.page.body"))
	if err != nil || len(paths) < 80 {
		t.Fatalf("captures: %d %v", len(paths), err)
	}
	for _, path := range paths {
		name, _ := filepath.Rel(captures, path)
		ev, err := DecodeAccepted([]byte(readCapture(t, name)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		isFailed, reason := Failure(ev, &ev.Data[0])
		want, wantFailed := failed[name]
		if isFailed != wantFailed || !strings.HasPrefix(reason, want) {
			t.Errorf("%s: failed %v %q, want %v %q", name, isFailed, reason, wantFailed, want)
		}
		if FailureReason(ev) != ReasonFailed {
			t.Errorf("%s: classed %s", name, FailureReason(ev))
		}
	}
}

// TestFailureRules: the rules on real captures edited as a crawled site, or
// the API's cancellation, would edit them. What a page says of itself (its
// metadata, which the API fills from the page's <meta> tags, and its text)
// neither fails a page nor hides a failure; only success, statusCode and
// the API's own cancellation error decide.
func TestFailureRules(t *testing.T) {
	t.Parallel()
	ok := readCapture(t, "run1/0002-crawl.page.body")       // 200, success true
	notFound := readCapture(t, "run1/0042-crawl.page.body") // 404, success true
	down := readCapture(t, "run2/0043-crawl.page.body")     // success false
	downError := `"error":"All scraping engines failed to retrieve content from this URL.`
	if !strings.Contains(ok, `"statusCode":200`) || !strings.Contains(notFound, `"statusCode":404`) || !strings.Contains(down, downError) {
		t.Fatal("the captures changed")
	}
	// withError replaces the failed capture's error (up to its end) by text.
	withError := func(text string) string {
		start := strings.Index(down, `"error":"`)
		end := strings.Index(down, `","metadata":{"run"`)
		return down[:start] + `"error":` + quote(text) + down[end+1:]
	}
	// withMeta adds fields to a capture's page metadata, as a page's own
	// <meta> tags would.
	withMeta := func(body, fields string) string {
		return edit(t, body, `"metadata":{"title"`, `"metadata":{`+fields+`,"title"`)
	}
	for _, tc := range []struct {
		name       string
		body       string
		wantFailed bool
		wantReason string // prefix of the reason
		wantClass  string
	}{
		{"200 page", ok, false, "", ""},
		{"200 page with metadata.error", withMeta(ok, `"error":"Internal Server Error"`), false, "", ""},
		{"200 page whose metadata.error is the cancellation error", withMeta(ok, `"error":`+quote(cancelledNow)), false, "", ""},
		{"404 page", notFound, true, "HTTP 404", ReasonFailed},
		{"404 page with metadata.error", withMeta(notFound, `"error":"gone"`), true, "HTTP 404: gone", ReasonFailed},
		{"500 page quoting the cancellation error",
			edit(t, edit(t, notFound, `"statusCode":404`, `"statusCode":500`), `Message: File not found.`, cancelledNow),
			true, "HTTP 500", ReasonFailed},
		{"500 page whose metadata.error is the cancellation error",
			withMeta(edit(t, notFound, `"statusCode":404`, `"statusCode":500`), `"error":`+quote(cancelledNow)),
			true, "HTTP 500: " + cancelledNow, ReasonFailed},
		{"failed scrape", down, true, "All scraping engines failed", ReasonFailed},
		{"cancelled page", withError(cancelledNow), true, cancelledNow, ReasonCancelled},
		{"cancelled page, the API's earlier error", withError("Parent crawl/batch scrape was cancelled"), true, "Parent crawl", ReasonCancelled},
		{"failure whose error contains the cancellation error", withError("Request failed: " + cancelledNow), true, "Request failed", ReasonFailed},
		{"failure whose error is a part of it", withError("parent crawl or batch scrape was cancelled"), true, "parent crawl", ReasonFailed},
		{"cancellation error on a page that did not fail",
			edit(t, ok, `"metadata":{}}`, `"error":`+quote(cancelledNow)+`,"metadata":{}}`), false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := DecodeAccepted([]byte(tc.body))
			if err != nil || len(ev.Data) != 1 {
				t.Fatalf("decode: %v", err)
			}
			failed, reason := Failure(ev, &ev.Data[0])
			if failed != tc.wantFailed || !strings.HasPrefix(reason, tc.wantReason) || (!failed && reason != "") {
				t.Fatalf("Failure: %v %q, want %v %q", failed, reason, tc.wantFailed, tc.wantReason)
			}
			if failed && FailureReason(ev) != tc.wantClass {
				t.Errorf("class %s, want %s", FailureReason(ev), tc.wantClass)
			}
		})
	}
}

// edit replaces the one occurrence of old in body, which must be there.
func edit(t *testing.T, body, old, new string) string {
	t.Helper()
	if strings.Count(body, old) != 1 {
		t.Fatalf("%q is not in the capture once", old)
	}
	return strings.Replace(body, old, new, 1)
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
