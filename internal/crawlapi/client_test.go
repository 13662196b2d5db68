package crawlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
)

// recordWaits makes c record the waits it takes between attempts instead
// of (or, with real, as well as) spending them, and returns what it saw.
func recordWaits(c *Client, real bool) func() []time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		if real {
			return backoff.Sleep(ctx, d)
		}
		return ctx.Err()
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), waits...)
	}
}

// TestRetryWaitHostile: whatever number a 429 names, the wait stays within
// [0, MaxBackoff]; what is no wait at all falls back to the backoff.
func TestRetryWaitHostile(t *testing.T) {
	t.Parallel()
	const maxWait = time.Minute
	c := newTestClient(t, "http://127.0.0.1:1", func(c *ClientConfig) { c.MinBackoff, c.MaxBackoff = time.Second, maxWait })
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	backoff := [2]time.Duration{500 * time.Millisecond, time.Second} // attempt 1
	tests := []struct {
		name     string
		header   string
		body     string
		min, max time.Duration
	}{
		{"text overflows a Duration", "", `{"error":"please retry after 99999999999s"}`, maxWait, maxWait},
		{"text beyond float64", "", `{"error":"retry after ` + strings.Repeat("9", 400) + `s"}`, maxWait, maxWait},
		{"text fraction", "", `{"error":"retry after 1.5s"}`, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"text zero", "", `{"error":"retry after 0s"}`, 0, 0},
		{"header overflows a Duration", "99999999999", "", maxWait, maxWait},
		{"header beyond int64", "99999999999999999999999", "", maxWait, maxWait},
		{"header beyond float64", strings.Repeat("9", 400), "", maxWait, maxWait},
		{"header exponent", "1e300", "", maxWait, maxWait},
		{"header Inf", "+Inf", "", maxWait, maxWait},
		{"header NaN", "NaN", "", backoff[0], backoff[1]},
		{"header negative", "-5", "", backoff[0], backoff[1]},
		{"header huge negative", "-99999999999999999999", "", backoff[0], backoff[1]},
		{"header garbage", "soon", "", backoff[0], backoff[1]},
		{"header date far ahead", "Fri, 31 Dec 9999 23:59:59 GMT", "", maxWait, maxWait},
		{"header date in the past", "Mon, 01 Jan 1900 00:00:00 GMT", "", 0, 0},
		{"header date soon", now.Add(20 * time.Second).Format(http.TimeFormat), "", 20 * time.Second, 20 * time.Second},
		{"header wins over text", "3", `{"error":"retry after 99999999999s"}`, 3 * time.Second, 3 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("Retry-After", tc.header)
			}
			if d := c.retryWait(1, h, []byte(tc.body)); d < tc.min || d > tc.max {
				t.Fatalf("wait %v, want %v..%v", d, tc.min, tc.max)
			}
		})
	}
	// The exponential backoff never overflows, however many attempts.
	for _, attempt := range []int{0, 1, 30, 64, 1 << 20} {
		if d := c.retryWait(attempt, http.Header{}, nil); d < 0 || d > maxWait {
			t.Errorf("attempt %d: wait %v", attempt, d)
		}
	}
}

// TestClientNotHammeredByHugeRetryAfter: a server answering 429 "retry
// after 99999999999s" gets Attempts requests, each after MaxBackoff, then
// the request fails as unavailable.
func TestClientNotHammeredByHugeRetryAfter(t *testing.T) {
	t.Parallel()
	for _, header := range []string{"", "99999999999999999999"} {
		t.Run("Retry-After="+header, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				if header != "" {
					w.Header().Set("Retry-After", header)
				}
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprint(w, `{"success":false,"error":"Rate limit exceeded. please retry after 99999999999s, resets at x"}`)
			}))
			defer srv.Close()
			const maxWait = 20 * time.Millisecond
			c := newTestClient(t, srv.URL, func(c *ClientConfig) {
				c.Attempts, c.MinBackoff, c.MaxBackoff = 4, time.Millisecond, maxWait
			})
			waits := recordWaits(c, true)
			_, err := c.Get(context.Background(), "c", JobRef(events.KindCrawl, "c"))
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("err %v", err)
			}
			if n.Load() != 4 {
				t.Fatalf("%d requests, want 4 (Attempts)", n.Load())
			}
			got := waits()
			if len(got) != 3 {
				t.Fatalf("waits %v, want 3", got)
			}
			for _, d := range got {
				if d != maxWait {
					t.Fatalf("waits %v, want each %v", got, maxWait)
				}
			}
		})
	}
}

// TestStatusNumbersClamped: counts the API sends as floats, exponents,
// negatives or beyond int64 neither fail the page nor go negative.
func TestStatusNumbersClamped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body                      string
		total, completed, credits int
	}{
		{`{"success":true,"status":"completed","total":-5,"completed":-1,"creditsUsed":-1,"data":[]}`, 0, 0, -1},
		{`{"success":true,"status":"completed","total":1e300,"completed":99999999999999999999999,"creditsUsed":-7,"data":[]}`, maxCount, maxCount, -1},
		{`{"success":true,"status":"completed","total":41.0,"completed":null,"creditsUsed":3,"data":[]}`, 41, 0, 3},
	}
	for _, tc := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, tc.body) }))
		p, err := newTestClient(t, srv.URL, nil).Get(context.Background(), "c", JobRef(events.KindCrawl, "c"))
		srv.Close()
		if err != nil || p.Total != tc.total || p.Completed != tc.completed || p.CreditsUsed != tc.credits {
			t.Errorf("%s: %+v %v", tc.body, p, err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"success":true,"status":"completed","total":"many","data":[]}`)
	}))
	defer srv.Close()
	if _, err := newTestClient(t, srv.URL, nil).Get(context.Background(), "c", JobRef(events.KindCrawl, "c")); err == nil || !strings.Contains(err.Error(), "total is not a number") {
		t.Errorf("total \"many\": %v", err)
	}
	for ref, want := range map[string]int{"/x?skip=-3": -1, "/x?skip=99999999999999999999": -1, "/x?skip=7": 7, "/x": -1} {
		if got := SkipOf(ref); got != want {
			t.Errorf("SkipOf(%s) = %d, want %d", ref, got, want)
		}
	}
}

// listener counts what reaches a server that must never be asked.
type listener struct {
	name     string
	addr     string // host:port
	requests atomic.Int32
	auth     atomic.Int32
}

func startListener(t *testing.T, name, addr string) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Logf("listener %s on %s: %v (case not covered)", name, addr, err)
		return nil
	}
	l := &listener{name: name, addr: ln.Addr().String()}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			l.auth.Add(1)
		}
		w.WriteHeader(http.StatusTeapot)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return l
}

// TestHostileNext serves next links crafted to send the request, and the
// key, elsewhere, from a real API server while other listeners (another
// port, IPv6 loopback on another port and on the API's own port, which
// "localhost" may reach) count what reaches them. Nothing may; each link
// is either refused (ErrForeignNext) or followed on the API's host.
func TestHostileNext(t *testing.T) {
	t.Parallel()
	var apiRequests atomic.Int32
	var prefix, nextLink atomic.Value // the base path and next of the current case
	prefix.Store("")
	nextLink.Store("null")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiRequests.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path == prefix.Load().(string)+"/v2/crawl/c" && r.URL.RawQuery == "" {
			fmt.Fprintf(w, `{"success":true,"status":"scraping","total":100,"next":%s,"data":[{"markdown":"x","metadata":{"url":"https://e.com/","scrapeId":"s","statusCode":200}}]}`, nextLink.Load().(string))
			return
		}
		// Anything else on our host is the last page.
		fmt.Fprint(w, `{"success":true,"status":"completed","total":1,"data":[]}`)
	}))
	defer api.Close()
	_, port, _ := net.SplitHostPort(api.Listener.Addr().String())
	others := []*listener{
		startListener(t, "other port", "127.0.0.1:0"),
		startListener(t, "IPv6 loopback", "[::1]:0"),
		startListener(t, "IPv6 loopback on the API's port", "[::1]:"+port),
	}
	other := others[0].addr
	base := api.Listener.Addr().String()
	var v6 string
	if others[1] != nil {
		v6 = others[1].addr
	}

	const (
		either  = ""
		foreign = "foreign"
		stay    = "stay"
	)
	tests := []struct {
		next, want string
	}{
		{"@" + other + "/v2/crawl/c?skip=1", either},
		{"@evil.example/v2/crawl/c?skip=1", stay},
		{"." + other + "/v2/crawl/c?skip=1", either},
		{".evil.example/v2/crawl/c?skip=1", stay},
		{other + "/v2/crawl/c?skip=1", either},
		{"localhost:" + port + "/v2/crawl/c?skip=1", foreign},
		{"evil.example/v2/crawl/c?skip=1", stay},
		{"//" + other + "/v2/crawl/c?skip=1", foreign},
		{"///" + other + "/v2/crawl/c?skip=1", either},
		{"http://" + base + "@" + other + "/v2/crawl/c?skip=1", foreign},
		{"http://user:pass@" + base + "/v2/crawl/c?skip=1", foreign},
		{"http://" + other + "#@" + base + "/v2/crawl/c?skip=1", foreign},
		{"http://" + other + "?@" + base + "/v2/crawl/c?skip=1", foreign},
		{`\\` + other + `\v2\crawl\c?skip=1`, either},
		{`/\` + other + `/v2/crawl/c?skip=1`, stay},
		{`http:\\` + other + `\v2?skip=1`, foreign},
		{`http://` + base + `\@` + other + `/v2?skip=1`, foreign},
		{"%2F%2F" + other + "/v2/crawl/c?skip=1", either},
		{"%2F%2Fevil.example/v2/crawl/c?skip=1", stay},
		{"/%2F" + other + "/v2/crawl/c?skip=1", stay},
		{"%40" + other + "/v2/crawl/c?skip=1", either},
		{"http://evil.example%40" + base + "/v2/crawl/c?skip=1", foreign},
		{"http://" + base + "%2F@" + other + "/v2/crawl/c?skip=1", foreign},
		{"http://[::1]:" + port + "/v2/crawl/c?skip=1", foreign},
		{"http://" + v6 + "/v2/crawl/c?skip=1", foreign},
		{"http://[::ffff:127.0.0.1]:" + port + "/v2/crawl/c?skip=1", foreign},
		{"http://localhost:" + port + "/v2/crawl/c?skip=1", foreign},
		{"http://127.1:" + port + "/v2/crawl/c?skip=1", foreign},
		{"http://2130706433:" + port + "/v2/crawl/c?skip=1", foreign},
		{"http://127.0.0.1.:" + port + "/v2/crawl/c?skip=1", foreign},
		{"http://" + other + "/v2/crawl/c?skip=1", foreign},
		{"http://127.0.0.1:80/v2/crawl/c?skip=1", foreign},
		{"http://127.0.0.1:0" + port + "/v2/crawl/c?skip=1", foreign},
		{"ftp://" + other + "/v2/crawl/c?skip=1", foreign},
		{"javascript:fetch('//" + other + "')", foreign},
		{" http://" + other + "/v2/crawl/c?skip=1", foreign},
		{"http://" + base + "/v2/crawl/c?skip=1", stay},
		{"https://" + base + "/v2/crawl/c?skip=1", stay},
		{"HTTP://" + strings.ToUpper(base) + "/v2/crawl/c?skip=1", stay},
		{"http://127.0.0.1/v2/crawl/c?skip=1", stay},
		{"/v2/crawl/c?skip=1", stay},
		{"c?skip=1", stay},
		{"?skip=1", stay},
	}
	for _, basePath := range []string{"", "/api"} {
		prefix.Store(basePath)
		for _, tc := range tests {
			nextLink.Store(mustJSON(tc.next))
			apiRequests.Store(0)
			log, buf := logtest.WithoutSecret(t, testKey)
			c, err := NewClient(ClientConfig{BaseURL: api.URL + basePath, Key: testKey, Attempts: 1, NotFoundRetries: -1}, log)
			if err != nil {
				t.Fatal(err)
			}
			last, err := follow(context.Background(), c)
			for _, o := range others {
				if o != nil && o.requests.Load() != 0 {
					t.Fatalf("base %q, next %q: %d requests (%d with Authorization) reached %s", basePath, tc.next, o.requests.Load(), o.auth.Load(), o.name)
				}
			}
			t.Logf("base %q, next %q: %v after %d API requests", basePath, tc.next, err, apiRequests.Load())
			switch {
			case errors.Is(err, ErrForeignNext):
				if tc.want == stay {
					t.Errorf("base %q, next %q refused: %v", basePath, tc.next, err)
				}
				if apiRequests.Load() != 1 || !strings.Contains(buf.String(), "not followed") {
					t.Errorf("base %q, next %q: %d API requests, log:\n%s", basePath, tc.next, apiRequests.Load(), buf)
				}
			case err == nil:
				if tc.want == foreign {
					t.Errorf("base %q, next %q followed: %+v", basePath, tc.next, last)
				}
				if apiRequests.Load() != 2 || !Terminal(last.Status) {
					t.Errorf("base %q, next %q: %d API requests, last page %+v", basePath, tc.next, apiRequests.Load(), last)
				}
			default:
				t.Errorf("base %q, next %q: %v", basePath, tc.next, err)
			}
		}
	}
}

// follow reads crawl c's first page and then the page its next link names,
// as a walk does, and returns the last page read.
func follow(ctx context.Context, c *Client) (*StatusPage, error) {
	first := JobRef(events.KindCrawl, "c")
	p, err := c.Get(ctx, "c", first)
	if err != nil || p.Next == "" {
		return p, err
	}
	ref, err := c.Ref(first, p.Next)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, "c", ref)
}

func mustJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestRetryWait(t *testing.T) {
	t.Parallel()
	c := newTestClient(t, "http://127.0.0.1:1", func(c *ClientConfig) { c.MinBackoff, c.MaxBackoff = time.Second, time.Minute })
	tests := []struct {
		name     string
		header   string
		body     string
		attempt  int
		min, max time.Duration
	}{
		{"Retry-After seconds", "7", `{"error":"retry after 3s"}`, 1, 7 * time.Second, 7 * time.Second},
		{"error text", "", `{"success":false,"error":"Rate limit exceeded ... please retry after 12s, resets at x"}`, 1, 12 * time.Second, 12 * time.Second},
		{"capped", "3600", "", 1, time.Minute, time.Minute},
		{"exponential", "", `{"error":"Internal"}`, 4, 4 * time.Second, 8 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("Retry-After", tc.header)
			}
			if d := c.retryWait(tc.attempt, h, []byte(tc.body)); d < tc.min || d > tc.max {
				t.Fatalf("wait %v, want %v..%v", d, tc.min, tc.max)
			}
		})
	}
}

func TestRef(t *testing.T) {
	t.Parallel()
	c := newTestClient(t, "https://api.example.com", nil)
	tests := []struct {
		next, ref string
		foreign   bool
	}{
		{"https://api.example.com/v2/crawl/x?skip=10", "/v2/crawl/x?skip=10", false},
		{"http://api.example.com/v2/crawl/x?skip=10", "/v2/crawl/x?skip=10", false},
		{"http://API.example.com/v2/crawl/x", "/v2/crawl/x", false},
		{"https://api.example.com:443/v2/crawl/x", "/v2/crawl/x", false},
		{"/v2/crawl/x?skip=3", "/v2/crawl/x?skip=3", false},
		// Relative references resolve against the page that carried them.
		{"x?skip=3", "/v2/crawl/x?skip=3", false},
		{"?skip=4", "/v2/crawl/x?skip=4", false},
		{"../crawl/y", "/v2/crawl/y", false},
		{"@evil.example.net/v2/crawl/x", "/v2/crawl/@evil.example.net/v2/crawl/x", false},
		{"evil.example.net/x", "/v2/crawl/evil.example.net/x", false},
		{"%2F%2Fevil.example.net/x", "/v2/crawl/%2F%2Fevil.example.net/x", false},
		{"https://evil.example.net/v2/crawl/x?skip=10", "", true},
		{"https://api.example.com:8443/v2/crawl/x", "", true},
		{"http://api.example.com:80/v2/crawl/x", "", true},
		{"https://api.example.com.evil.net/v2/crawl/x", "", true},
		{"//evil.example.net/v2/crawl/x", "", true},
		{"https://api.example.com@evil.example.net/", "", true},
		{"https://user@api.example.com/v2/crawl/x", "", true},
		{"https://api.example.com//evil.example.net/x", "", true},
		{"javascript:alert(1)", "", true},
		{"evil.example.net:443/x", "", true},
	}
	for _, tc := range tests {
		ref, err := c.Ref(JobRef(events.KindCrawl, "x"), tc.next)
		if tc.foreign != errors.Is(err, ErrForeignNext) || ref != tc.ref {
			t.Errorf("Ref(%q) = %q, %v", tc.next, ref, err)
		}
	}
	api := newTestClient(t, "https://h.example/api/", nil)
	for ref, want := range map[string]string{
		"/api/v2/crawl/x?skip=1":      "https://h.example/api/v2/crawl/x?skip=1",
		JobRef(events.KindCrawl, "x"): "https://h.example/api/v2/crawl/x",
		"/v2/crawl/a%2Fb?skip=1":      "https://h.example/api/v2/crawl/a%2Fb?skip=1",
	} {
		if got, err := api.target(ref); err != nil || got.String() != want {
			t.Errorf("target(%q) = %v %v, want %s", ref, got, err, want)
		}
	}
	if ref, err := api.Ref(JobRef(events.KindCrawl, "x"), "x?skip=2"); err != nil || ref != "/api/v2/crawl/x?skip=2" {
		t.Errorf("relative next under a base path: %q %v", ref, err)
	}
	// A saved cursor is input too: one naming a host is never dialled.
	for _, ref := range []string{"//evil.example/x", "http://evil.example/x", "v2/crawl/x", "https://u:p@h.example/api/x"} {
		if got, err := api.target(ref); err == nil {
			t.Errorf("target(%q) = %v", ref, got)
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
