package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

const base = "/ui"

func startPages(t *testing.T, a reader.Archive) *httptest.Server {
	t.Helper()
	return startPagesLogging(t, a, zerolog.Nop())
}

func startPagesLogging(t *testing.T, a reader.Archive, log zerolog.Logger) *httptest.Server {
	t.Helper()
	s, err := web.New(a, web.Options{Base: base, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, srv *httptest.Server, path string) answer {
	t.Helper()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func pageQuery(u, job string) string {
	return base + "/page?" + url.Values{"url": {u}, "job": {job}}.Encode()
}

// Every page, error and the stylesheet carry the headers that keep
// crawled content inert, and every page is inert whatever the archive
// holds.
func TestPagesAreInert(t *testing.T) {
	t.Parallel()
	arch, jobs := hostileArchive("http://127.0.0.1:9")
	srv := startPages(t, arch)
	for _, tc := range []struct {
		name   string
		path   string
		status int
		want   []string // in the body, as the browser shows it (escaped)
	}{
		{"jobs", base + "/jobs", 200, []string{jobs[0][:8], jobs[1][:8]}},
		{"job", base + "/jobs/" + jobs[0], 200, []string{jobs[0], "&lt;script&gt;window.__pwned=&#39;error&#39;&lt;/script&gt;"}},
		{"failures", base + "/failures", 200, []string{`href="/ui/failures?job=` + jobs[0]}},
		{"failures of a job", base + "/failures?job=" + jobs[1], 200, []string{jobs[1], "&lt;img src=x onerror=&#34;window.__pwned=&#39;failure&#39;&#34;&gt;&lt;script&gt;",
			"Crawl was cancelled", "Blocked by robots.txt", "javascript:window.__pwned=&#39;url&#39;//https://example.org//robots"}},
		{"cancelled failures of a job", base + "/failures?reason=cancelled&job=" + jobs[1], 200, []string{"Crawl was cancelled"}},
		{"bad reason", base + "/failures?reason=x&job=" + jobs[1], 400, []string{"parameter reason: not one of failed, cancelled"}},
		{"search by status class", base + "/search?q=zebrafish&status=2xx&since=2026-11-01&until=2026-11-30", 200, []string{`value="2xx"`, `value="2026-11-30"`}},
		{"search form", base + "/search", 200, []string{`name="q"`}},
		{"search", base + "/search?q=zebrafish", 200, []string{"<mark>zebrafish</mark>", "&lt;/title&gt;&lt;script&gt;", `<p class="count">4 matches</p>`}},
		{"page with javascript url", pageQuery(browsertest.HostileURL, jobs[0]), 200, []string{`<span class="url">javascript:window.__pwned=&#39;url&#39;//https://example.org/</span>`, "zebrafish is"}},
		{"page latest", pageQuery("https://example.org/hostile", ""), 200, []string{"zebrafish now is", `href="https://example.org/hostile"`, `sandbox`, `srcdoc="&lt;!doctype html&gt;`}},
		{"page of resource hints", pageQuery("https://example.org/hints", ""), 200, []string{`srcdoc="&lt;!doctype html&gt;`, "zebrafish hints", "cell", "a link"}},
		{"diff", base + "/diff?" + url.Values{"url": {"https://example.org/hostile"}}.Encode(), 200, []string{`<p class="hunk-head mono">@@ -1,6 &#43;1,6 @@</p>`,
			`<tr class="line op-del"><td class="ln">3</td><td class="ln"></td><td class="text">- The word zebrafish is`,
			`<tr class="line op-add"><td class="ln"></td><td class="ln">3</td><td class="text">&#43; The word zebrafish <mark class="word">now </mark>is`}},
		{"page with its diff in place and its Document", pageQuery("https://example.org/hostile", ""), 200, []string{`<section class="changes">`,
			`<td class="text">&#43; The word zebrafish <mark class="word">now </mark>is`, `<pre class="source raw">{&#34;markdown&#34;:&#34;&lt;script&gt;window.__pwned=&#39;document&#39;&lt;/script&gt;`}},
		{"first version, no diff", pageQuery("https://example.org/hostile", jobs[0]), 200, []string{`<pre class="source raw">`}},
		{"stylesheet", base + "/static/style.css", 200, nil},
		{"unknown path", base + "/nope", 404, []string{"nothing is served at this path"}},
		{"unknown job", base + "/jobs/6c2e0b1a-0000-4000-8000-000000000000", 404, []string{"crawl not in the archive"}},
		{"bad job id", base + "/jobs/%3Cscript%3E", 400, []string{"parameter id: not a job id"}},
		{"page without url", base + "/page", 400, []string{"parameter url: missing"}},
		{"bad status", base + "/search?q=a&status=999", 400, []string{"parameter status"}},
		{"bad change", base + "/search?q=a&change=%3Cb%3E", 400, []string{"parameter change: not one of new, changed, same, removed"}},
		{"bad since", base + "/search?q=a&since=yesterday", 400, []string{"parameter since"}},
		{"query too long", base + "/search?q=" + strings.Repeat("a", 1001), 400, []string{"parameter q: longer than 1000 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, srv, tc.path)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d; body:\n%s", a.status, tc.status, a.body)
			}
			csp := a.header.Get("Content-Security-Policy")
			for _, d := range []string{"script-src 'none'", "default-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
				if !strings.Contains(csp, d) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, d)
				}
			}
			if got := a.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(a.body, w) {
					t.Errorf("body lacks %q:\n%s", w, a.body)
				}
			}
			if strings.HasPrefix(a.header.Get("Content-Type"), "text/html") {
				assertInert(t, a.body, base)
			}
		})
	}
}

// failing is an archive whose every method fails with err.
func failing(err error) *archivetest.Archive {
	return &archivetest.Archive{Hold: func(context.Context, string) error { return err }}
}

// ClickHouse out of reach is a 503 with Retry-After, and an error it
// refuses a 500; neither page shows anything of the error.
func TestArchiveErrorIsNotShown(t *testing.T) {
	t.Parallel()
	srv := startPages(t, failing(errors.New("dial tcp 10.0.0.7:9000: secret-host refused")))
	a := get(t, srv, base+"/jobs")
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "5" || strings.Contains(a.body, "secret-host") {
		t.Fatalf("status %d Retry-After %q body:\n%s", a.status, a.header.Get("Retry-After"), a.body)
	}
	srv = startPages(t, failing(&clickhouse.Exception{Code: 62, Message: "Syntax error near secret_column"}))
	a = get(t, srv, base+"/page?url=x")
	if a.status != http.StatusInternalServerError || strings.Contains(a.body, "secret_column") {
		t.Fatalf("status %d body:\n%s", a.status, a.body)
	}
}

// The archive's own refusals name their parameter, as the pages' do.
func TestArchiveInvalidIsBadRequest(t *testing.T) {
	t.Parallel()
	srv := startPages(t, failing(&query.ParamError{Param: "cursor", Reason: "not a cursor of this search"}))
	a := get(t, srv, base+"/search?q=x&cursor=zz")
	if a.status != 400 || !strings.Contains(a.body, "parameter cursor: not a cursor of this search") {
		t.Fatalf("status %d body:\n%s", a.status, a.body)
	}
}

// A query past the archive's limits is a 422 that says to narrow it.
func TestQueryPastLimitsIsUnprocessable(t *testing.T) {
	t.Parallel()
	srv := startPages(t, failing(fmt.Errorf("search: %w (memory limit)", query.ErrLimit)))
	a := get(t, srv, base+"/search?q=the")
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "narrow it") {
		t.Fatalf("status %d body:\n%s", a.status, a.body)
	}
}

func TestRootRedirectsToJobs(t *testing.T) {
	t.Parallel()
	srv := startPages(t, &archivetest.Archive{})
	a := get(t, srv, base+"/")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != base+"/jobs" {
		t.Fatalf("status %d location %q", a.status, a.header.Get("Location"))
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	if _, err := web.New(nil, web.Options{}); err == nil {
		t.Error("nil archive accepted")
	}
	if _, err := web.New(&archivetest.Archive{}, web.Options{Base: "ui"}); err == nil {
		t.Error("base without a leading slash accepted")
	}
}

// A violation report is logged with the page (without its query), the
// directive and what was blocked; anything else is refused unlogged.
func TestCSPReportIsLogged(t *testing.T) {
	t.Parallel()
	logged := &logtest.Buffer{}
	srv := startPagesLogging(t, &archivetest.Archive{}, zerolog.New(logged))
	post := func(body string) int {
		resp, err := srv.Client().Post(srv.URL+base+"/csp-report", "application/csp-report", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	report := `{"csp-report":{"document-uri":"http://h/ui/page?url=x&token=secret-in-query","effective-directive":"img-src","blocked-uri":"http://evil.example/` + strings.Repeat("a", 2000) + `"}}`
	if got := post(report); got != http.StatusNoContent {
		t.Fatalf("report: status %d", got)
	}
	if got := post("not json"); got != http.StatusBadRequest {
		t.Errorf("junk: status %d", got)
	}
	if got := post(`{"csp-report":{"blocked-uri":"` + strings.Repeat("a", 20000) + `"}}`); got != http.StatusBadRequest {
		t.Errorf("huge: status %d", got)
	}
	out := logged.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `"page":"http://h/ui/page"`) || !strings.Contains(out, `"directive":"img-src"`) ||
		!strings.Contains(out, `"blocked":"http://evil.example/aaa`) || strings.Contains(out, "secret-in-query") || len(out) > 1500 {
		t.Errorf("logged:\n%s", out)
	}
}

// A flood of reports, which need no token, logs ReportBurst lines and no
// more; every report is still answered 204.
func TestCSPReportFloodIsBounded(t *testing.T) {
	t.Parallel()
	logged := &logtest.Buffer{}
	now := time.Unix(1_000_000, 0) // stopped: the bucket never refills
	s, err := web.New(&archivetest.Archive{}, web.Options{Base: base, Logger: zerolog.New(logged), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	report := `{"csp-report":{"document-uri":"http://h/ui/page","effective-directive":"script-src","blocked-uri":"inline"}}`
	for i := 0; i < web.ReportBurst+50; i++ {
		resp, err := srv.Client().Post(srv.URL+base+"/csp-report", "application/csp-report", strings.NewReader(report))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("report %d: status %d", i, resp.StatusCode)
		}
	}
	if n := strings.Count(logged.String(), "\n"); n != web.ReportBurst {
		t.Errorf("%d lines logged for %d reports at once, want the burst of %d", n, web.ReportBurst+50, web.ReportBurst)
	}
}

// A page of tens of megabytes is shown cut, and its html not rendered.
func TestLargePageIsCut(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("<p>zebrafish</p>\n", 5<<20/17)
	arch := &archivetest.Archive{}
	arch.AddPage(query.ArchivedPage{URL: "https://example.org/big", CrawlID: uuid.MustParse("0b6f8a5e-3c1d-4e2f-9a7b-1c2d3e4f5a6b"), Success: true, StatusCode: 200,
		Markdown: big, HTML: big})
	srv := startPages(t, arch)
	a := get(t, srv, pageQuery("https://example.org/big", ""))
	if a.status != 200 || strings.Contains(a.body, "<iframe") || !strings.Contains(a.body, "first megabyte") || len(a.body) > 4<<20 {
		t.Fatalf("status %d, %d bytes, iframe %v", a.status, len(a.body), strings.Contains(a.body, "<iframe"))
	}
	assertInert(t, a.body, base)
}

// A page whose markdown goldmark would spend minutes on is shown at once,
// its markdown as escaped text, and the fallback is logged.
func TestCostlyMarkdownIsShownAsText(t *testing.T) {
	t.Parallel()
	md := strings.Repeat("[a](", 128<<10/4) + "<script>"
	arch := &archivetest.Archive{}
	arch.AddPage(query.ArchivedPage{URL: "https://example.org/costly", CrawlID: uuid.MustParse("0b6f8a5e-3c1d-4e2f-9a7b-1c2d3e4f5a6b"), Success: true, StatusCode: 200,
		Markdown: md})
	logged := &logtest.Buffer{}
	srv := startPagesLogging(t, arch, zerolog.New(logged))
	a := get(t, srv, pageQuery("https://example.org/costly", ""))
	if a.status != 200 || strings.Contains(a.body, `<article class="markdown">`) || !strings.Contains(a.body, "too costly to render") ||
		!strings.Contains(a.body, `<pre class="source">[a]([a](`) || !strings.Contains(a.body, "&lt;script&gt;</pre>") {
		t.Fatalf("status %d, body:\n%.3000s", a.status, a.body)
	}
	if !strings.Contains(logged.String(), "markdown shown as text") || !strings.Contains(logged.String(), "budget") {
		t.Errorf("logged:\n%s", logged.String())
	}
	assertInert(t, a.body, base)
}
