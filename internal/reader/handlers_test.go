package reader_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
	"github.com/google/uuid"
)

// twoJobs is an archive of jobs A and B, each holding a version of one URL
// (B's changed), A a failure, a cancelled page and a blocked URL.
func twoJobs() (a *archivetest.Archive, jobA, jobB uuid.UUID) {
	jobA, jobB = uuid.New(), uuid.New()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	a = &archivetest.Archive{}
	a.AddJob(query.JobStatus{Crawl: archive.Crawl{CrawlID: jobA, Kind: "crawl", FirstDeliveryAt: &t0, Failures: 1, CancelledPages: 1},
		TopErrors: []archive.ErrorCount{{Error: "timeout", Pages: 1}}, SuccessfulPages: 1})
	a.AddJob(query.JobStatus{Crawl: archive.Crawl{CrawlID: jobB, Kind: "crawl", FirstDeliveryAt: &t1}, SuccessfulPages: 1})
	a.AddPage(query.ArchivedPage{CrawlID: jobA, JobKind: "crawl", URL: "https://r.example/0", Title: "Zero", StatusCode: 200, Success: true, Origin: "webhook",
		ReceivedAt: t0, Markdown: "kettle\nold line", HTML: "<p>old</p>", Document: []byte(`{"markdown":"kettle\nold line"}`)})
	a.AddPage(query.ArchivedPage{CrawlID: jobB, JobKind: "crawl", URL: "https://r.example/0", Title: "Zero", StatusCode: 200, Success: true, Origin: "webhook",
		ReceivedAt: t1, Markdown: "kettle\nnew line", HTML: "<p>new</p>", Document: []byte(`{"markdown":"kettle\nnew line"}`)})
	a.AddFailure(jobA, query.FailedPage{URL: "https://r.example/broken", StatusCode: 500, Error: "timeout", Reason: "failed", ReceivedAt: t0})
	a.AddFailure(jobA, query.FailedPage{URL: "https://r.example/never", Error: "cancelled", Reason: "cancelled", ReceivedAt: t0})
	a.AddBlocked(jobA, "https://r.example/private")
	return a, jobA, jobB
}

// getJSON GETs path, wants status and JSON, and decodes the body into v.
func getJSON(t *testing.T, a answer, path string, status int, v any) {
	t.Helper()
	if a.status != status || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: %d %s %s, want %d JSON", path, a.status, a.header.Get("Content-Type"), a.body, status)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, a.body)
	}
}

// TestAnswers: the API's bodies over what the archive answers.
func TestAnswers(t *testing.T) {
	t.Parallel()
	a, jobA, jobB := twoJobs()
	srv := startReader(t, config(), a)
	u := url.QueryEscape("https://r.example/0")
	read := func(path string, v any) {
		t.Helper()
		getJSON(t, get(t, srv, path), path, http.StatusOK, v)
	}

	var s reader.SearchAnswer
	read("/v1/search?q=kettle", &s)
	if len(s.Hits) != 2 || s.Hits[0].JobID != jobB.String() || s.Hits[0].Change != "changed" || s.Hits[1].Change != "new" || s.Hits[0].Host != "r.example" {
		t.Errorf("search: %+v", s)
	}
	var p reader.PageAnswer
	read("/v1/pages?url="+u, &p)
	if p.JobID != jobB.String() || p.Markdown != "kettle\nnew line" || p.HTML == nil || *p.HTML != "<p>new</p>" || p.Origin != "webhook" {
		t.Errorf("page: %+v", p)
	}
	for format, want := range map[string]string{"markdown": "kettle\nold line", "html": "<p>old</p>", "document": `{"markdown":"kettle\nold line"}`} {
		r := get(t, srv, "/v1/pages?format="+format+"&url="+u+"&job="+jobA.String())
		if r.status != 200 || string(r.body) != want || r.header.Get("X-Crawlhouse-Job") != jobA.String() ||
			!strings.Contains(r.header.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("page as %s: %d %q %v", format, r.status, r.body, r.header)
		}
	}
	var h reader.HistoryAnswer
	read("/v1/pages/history?url="+u, &h)
	if len(h.Versions) != 2 || h.Versions[1].Change != "changed" || h.Versions[1].PreviousJobID == nil || *h.Versions[1].PreviousJobID != jobA.String() {
		t.Errorf("history: %+v", h)
	}
	var d reader.DiffAnswer
	read("/v1/pages/diff?url="+u, &d)
	if !d.Changed || d.From.JobID != jobA.String() || d.To.JobID != jobB.String() || !strings.Contains(d.Unified, "-old line\n+new line\n") {
		t.Errorf("diff: %+v", d)
	}
	var jobs reader.JobsAnswer
	read("/v1/jobs", &jobs)
	if len(jobs.Jobs) != 2 || jobs.Jobs[0].JobID != jobB.String() {
		t.Errorf("jobs: %+v", jobs)
	}
	var j reader.JobAnswer
	read("/v1/jobs/"+jobA.String(), &j)
	if j.Failures != 1 || j.CancelledPages != 1 || j.SuccessfulPages != 1 || len(j.TopErrors) != 1 || j.TopErrors[0].Error != "timeout" {
		t.Errorf("job: %+v", j)
	}
	var f reader.FailuresAnswer
	read("/v1/jobs/"+jobA.String()+"/failures?reason=failed", &f)
	if len(f.Failures) != 1 || f.Failures[0].URL != "https://r.example/broken" {
		t.Errorf("failures: %+v", f)
	}
	read("/v1/jobs/"+jobA.String()+"/cancelled", &f)
	if len(f.Failures) != 1 || f.Failures[0].Reason != "cancelled" {
		t.Errorf("cancelled: %+v", f)
	}
	var b reader.BlockedAnswer
	read("/v1/jobs/"+jobB.String()+"/blocked", &b)
	if b.URLs == nil || len(b.URLs) != 0 {
		t.Errorf("blocked of a job without any: %+v (want [])", b)
	}
	var c reader.ChangesAnswer
	read("/v1/changes", &c)
	if len(c.Changes) != 2 || c.Next == "" {
		t.Errorf("changes: %+v", c)
	}
	e := get(t, srv, "/v1/jobs/"+jobA.String()+"/export")
	if e.status != 200 || e.header.Get("Content-Type") != "application/x-ndjson" || string(e.body) != "{\"markdown\":\"kettle\\nold line\"}\n" ||
		e.header.Get("Content-Disposition") != `attachment; filename="job-`+jobA.String()+`.ndjson"` {
		t.Errorf("export: %d %v %q", e.status, e.header, e.body)
	}
}

// TestParameterErrorsNameTheField: a parameter the API cannot use is
// answered 400 invalid_parameter naming it, whether the API or the
// archive refuses it; what the archive does not hold is 404 not_found.
func TestParameterErrorsNameTheField(t *testing.T) {
	t.Parallel()
	a, jobA, _ := twoJobs()
	srv := startReader(t, config(), a)
	for _, tc := range []struct{ path, param string }{
		{"/v1/search?status=abc", "status"},
		{"/v1/search?status=500-400", "status"},
		{"/v1/search?from=yesterday", "from"},
		{"/v1/search?limit=0", "limit"},
		{"/v1/search?jb=x", "jb"},
		{"/v1/search?q=a&q=b", "q"},
		{"/v1/jobs?until=soon", "until"},
		{"/v1/jobs/not-a-uuid", "job"},
		{"/v1/jobs/not-a-uuid/failures", "job"},
		{"/v1/pages?url=", "url"},
		{"/v1/pages?url=x&format=pdf", "format"},
		{"/v1/pages/diff?url=x&from=nope", "from"},
		{"/v1/pages/diff?url=x&to=nope", "to"},
		{"/v1/pages/diff", "url"},
		{"/v1/jobs/" + jobA.String() + "/export?format=zip", "format"},
		{"/v1/changes?limit=many", "limit"},
	} {
		var e reader.ErrorBody
		getJSON(t, get(t, srv, tc.path), tc.path, http.StatusBadRequest, &e)
		if e.Error != "invalid_parameter" || e.Parameter != tc.param || !strings.Contains(e.Message, tc.param) {
			t.Errorf("%s: %+v, want parameter %s", tc.path, e, tc.param)
		}
	}
	for _, path := range []string{"/v1/pages?url=https://nowhere.example/", "/v1/pages?url=https://r.example/0&job=" + uuid.NewString(),
		"/v1/jobs/" + uuid.NewString(), "/v1/jobs/" + uuid.NewString() + "/export", "/v1/nothing", "/v1/pages/diff?url=https://nowhere.example/"} {
		var e reader.ErrorBody
		getJSON(t, get(t, srv, path), path, http.StatusNotFound, &e)
		if e.Error != "not_found" {
			t.Errorf("%s: %+v", path, e)
		}
	}
	var e reader.ErrorBody
	getJSON(t, get(t, srv, "/v1/jobs/"+jobA.String()+"/export?format=parquet"), "parquet", http.StatusNotImplemented, &e)
	if e.Error != "not_configured" {
		t.Errorf("parquet without ClickHouse's HTTP interface: %+v", e)
	}
}

// TestTokens: with tokens, an API request without one of them is 401
// with WWW-Authenticate; the operational endpoints need none.
func TestTokens(t *testing.T) {
	t.Parallel()
	cfg := config()
	cfg.OpenAccess, cfg.Tokens = false, []string{"a-token-of-the-test-0123"}
	a, _, _ := twoJobs()
	srv := startReader(t, cfg, a)
	for _, token := range []string{"", "not-the-token-0123456789"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/jobs", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("token %q: %d %v", token, resp.StatusCode, resp.Header)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer a-token-of-the-test-0123")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with the token: %d", resp.StatusCode)
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		if a := get(t, srv, path); a.status != http.StatusOK {
			t.Errorf("%s without a token: %d", path, a.status)
		}
	}
}

// TestJobWithoutItsChanges: a job whose change summary is past the read
// limits (or finds the archive busy) is still answered, its summary left
// out and the reason named; its status is not lost with it.
func TestJobWithoutItsChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code string
	}{{query.ErrLimit, "query_limit"}, {query.ErrBusy, "overloaded"}} {
		a, jobA, _ := twoJobs()
		a.Hold = func(_ context.Context, method string) error {
			if method == "JobChanges" {
				return tc.err
			}
			return nil
		}
		srv := startReader(t, config(), a)
		var j reader.JobAnswer
		getJSON(t, get(t, srv, "/v1/jobs/"+jobA.String()), "job", http.StatusOK, &j)
		if j.JobID != jobA.String() || j.Failures != 1 || j.Changes != nil || j.ChangesOmitted != tc.code {
			t.Errorf("%v: job %+v (changes %s)", tc.err, j, j.Changes)
		}
	}
	// Answered in full otherwise.
	a, jobA, _ := twoJobs()
	var j reader.JobAnswer
	getJSON(t, get(t, startReader(t, config(), a), "/v1/jobs/"+jobA.String()), "job", http.StatusOK, &j)
	if j.Changes == nil || j.ChangesOmitted != "" {
		t.Errorf("job with its changes: %+v", j)
	}
}
