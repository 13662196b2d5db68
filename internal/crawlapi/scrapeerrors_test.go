package crawlapi

import (
	"fmt"
	"strings"
	"testing"
)

// An errors answer is hostile input: entries of the wrong shape, without a
// URL or repeated are skipped and counted, never a reason to lose the
// others; strings are bounded; an answer that is not the errors object is
// an error, not "no failures".
func TestDecodeErrorsHostile(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", maxErrorTextBytes)
	p, err := decodeErrors([]byte(`{"errors":[
		{"id":"a","timestamp":"2026-03-01T12:00:00.000Z","url":"https://x/1","code":"SCRAPE_SITE_ERROR","error":"boom"},
		{"id":1,"url":"https://x/2","error":"` + long + `"},
		{"url":"https://x/1","error":"again"},
		{"error":"no url"},
		"not an object",
		{"url":42},
		{"url":"https://x/3"}
	],"robotsBlocked":["https://x/r","",7,"https://x/r"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) != 3 || p.Skipped != 7 {
		t.Fatalf("%d errors, %d skipped: %+v", len(p.Errors), p.Skipped, p)
	}
	first, second, third := p.Errors[0], p.Errors[1], p.Errors[2]
	if first.ID != "a" || first.Code != "SCRAPE_SITE_ERROR" || first.Error != "boom" || first.Timestamp.IsZero() {
		t.Fatalf("first %+v", first)
	}
	if second.ID != "" || len(second.Error) > maxErrorTextBytes+len("…") || !strings.HasSuffix(second.Error, "é…") {
		t.Fatalf("second: id %q, error of %d bytes", second.ID, len(second.Error))
	}
	if third.Error != "scrape failed" {
		t.Fatalf("third %+v", third)
	}
	if len(p.RobotsBlocked) != 1 || p.RobotsBlocked[0] != "https://x/r" {
		t.Fatalf("robots %v", p.RobotsBlocked)
	}
	for _, body := range []string{`[]`, `{"success":false,"error":"x"}`, `<html>`, `{}`} {
		if _, err := decodeErrors([]byte(body)); err == nil {
			t.Errorf("%s read as an errors answer", body)
		}
	}
}

// A hostile API listing robots-blocked URLs without end: what is recorded
// is bounded in count, in bytes and per URL, and what is left out is
// counted.
func TestDecodeErrorsRobotsBlockedBounded(t *testing.T) {
	t.Parallel()
	many := func(n int, url func(int) string) []byte {
		var b strings.Builder
		b.WriteString(`{"errors":[],"robotsBlocked":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + url(i) + `"`)
		}
		b.WriteString(`]}`)
		return []byte(b.String())
	}
	short := func(i int) string { return fmt.Sprintf("https://x/%d", i) }
	long := func(i int) string { return fmt.Sprintf("https://x/%05d/%s", i, strings.Repeat("a", 1000)) } // all of one length
	for _, tc := range []struct {
		name      string
		body      []byte
		kept, cut int
	}{
		{"a million URLs", many(1_000_000, short), maxRobotsBlocked, 1_000_000 - maxRobotsBlocked},
		{"long URLs, bytes bound first", many(maxRobotsBlocked, long), maxRobotsBlockedBytes / len(long(9999)), maxRobotsBlocked - maxRobotsBlockedBytes/len(long(9999))},
		{"one URL over the per-URL bound", []byte(`{"robotsBlocked":["https://x/` + strings.Repeat("a", maxBlockedURLBytes) + `","https://x/ok"]}`), 1, 1},
		{"within the bounds", many(100, short), 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := decodeErrors(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			size := 0
			for _, u := range p.RobotsBlocked {
				size += len(u)
				if len(u) > maxBlockedURLBytes {
					t.Fatalf("a URL of %d bytes kept", len(u))
				}
			}
			if len(p.RobotsBlocked) != tc.kept || p.RobotsBlockedCut != tc.cut || p.Skipped != tc.cut || size > maxRobotsBlockedBytes {
				t.Fatalf("kept %d (%d bytes), cut %d, skipped %d; want kept %d, cut %d", len(p.RobotsBlocked), size, p.RobotsBlockedCut, p.Skipped, tc.kept, tc.cut)
			}
		})
	}
}
