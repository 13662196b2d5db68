package crawlapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
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

// The errors endpoint goes through the same client as the status: the key
// on CRAWL_API_URL's host, 429 retried, a 404 answered once and reported
// as ErrNotFound (an API without the endpoint), 401 as ErrUnauthorized.
func TestClientErrorsEndpoint(t *testing.T) {
	t.Parallel()
	var requests, withKey atomic.Int64
	var answer atomic.Value
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := requests.Add(1)
		if req.Header.Get("Authorization") == "Bearer "+testKey {
			withKey.Add(1)
		}
		if req.URL.Path != "/base/v2/batch/scrape/j/errors" {
			t.Errorf("path %s", req.URL.Path)
		}
		switch answer.Load().(string) {
		case "throttle once":
			if n == 1 {
				w.WriteHeader(http.StatusTooManyRequests)
				w.Write([]byte(`{"success":false,"error":"Rate limit exceeded. please retry after 1s"}`))
				return
			}
			w.Write([]byte(`{"errors":[{"id":"x","url":"https://x/1","error":"boom"}],"robotsBlocked":[]}`))
		case "missing":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`<pre>Cannot GET /v2/batch/scrape/j/errors</pre>`))
		case "denied":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"success":false,"error":"Forbidden"}`))
		}
	}))
	t.Cleanup(api.Close)
	c := newTestClient(t, api.URL+"/base", nil)
	waits := recordWaits(c, false)

	answer.Store("throttle once")
	p, err := c.Errors(context.Background(), "j", ErrorsRef(events.KindBatchScrape, "j"))
	if err != nil || len(p.Errors) != 1 || requests.Load() != 2 || withKey.Load() != 2 || len(waits()) != 1 || waits()[0] != time.Second {
		t.Fatalf("throttled: %+v %v after %d requests, waits %v", p, err, requests.Load(), waits())
	}
	requests.Store(0)
	answer.Store("missing")
	if _, err := c.Errors(context.Background(), "j", ErrorsRef(events.KindBatchScrape, "j")); !errors.Is(err, ErrNotFound) || requests.Load() != 1 {
		t.Fatalf("missing endpoint: %v after %d requests", err, requests.Load())
	}
	answer.Store("denied")
	if _, err := c.Errors(context.Background(), "j", ErrorsRef(events.KindBatchScrape, "j")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("denied: %v", err)
	}
	if _, err := c.Errors(context.Background(), "j", "http://elsewhere/v2/crawl/j/errors"); err == nil || requests.Load() != 2 {
		t.Fatalf("a reference with a host was read: %v", err)
	}
}

// A job's references are its kind's paths, the id escaped.
func TestJobRefs(t *testing.T) {
	t.Parallel()
	if JobRef(events.KindBatchScrape, "a/b") != "/v2/batch/scrape/a%2Fb" || ErrorsRef(events.KindCrawl, "c") != "/v2/crawl/c/errors" {
		t.Errorf("refs %s %s", JobRef(events.KindBatchScrape, "a/b"), ErrorsRef(events.KindCrawl, "c"))
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
