package readercmd_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/readercmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
)

// seeded is an archive of two jobs: A (pages alpha 0 to 2, a page whose
// title, html and URL carry script, a failure, a cancelled page, a
// robots-blocked URL) and B (alpha 0 again, changed).
type seeded struct {
	cfg        archive.Config
	jobA, jobB string
}

const cancelled = "Parent crawl/batch scrape was cancelled"

func seed(t *testing.T) seeded {
	t.Helper()
	cfg, w := archiveDB(t)
	s := seeded{cfg: cfg, jobA: uuid.NewString(), jobB: uuid.NewString()}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for i, u := range []string{"https://r.example/0", "https://r.example/1", "https://r.example/2"} {
		deliver(t, w, pageBody(s.jobA, u, "Alpha", "alpha page\n\nline "+u, "<p>alpha</p>", 200), t0.Add(time.Duration(i)*time.Second))
	}
	deliver(t, w, pageBody(s.jobA, `https://r.example/"><script>alert(1)</script>`, "<script>alert(1)</script>", "alpha evil",
		"<script>window.pwned=1</script><p>evil</p>", 200), t0.Add(5*time.Second))
	deliver(t, w, failureBody(s.jobA, "https://r.example/broken", "timeout reaching the page"), t0.Add(6*time.Second))
	deliver(t, w, `{"success":false,"type":"crawl.page","id":"`+s.jobA+`","webhookId":"`+uuid.NewString()+`","error":"`+cancelled+`","data":[{"metadata":{"url":"https://r.example/never","sourceURL":"https://r.example/never"}}]}`, t0.Add(7*time.Second))
	if _, err := w.RecordBlockedURLs(context.Background(), s.jobA, []string{"https://r.example/private"}); err != nil {
		t.Fatal(err)
	}
	deliver(t, w, pageBody(s.jobB, "https://r.example/0", "Alpha", "alpha page\n\nline changed", "<p>alpha 2</p>", 200), t0.Add(time.Hour))
	return s
}

func TestRefusesToStartWithoutTokens(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		return map[string]string{"READER_LISTEN": "127.0.0.1:0", "READER_TOKENS": ""}[k]
	}
	err := readercmd.Run(context.Background(), []string{"reader"}, getenv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "READER_TOKENS") {
		t.Fatalf("started without tokens: %v", err)
	}
	short := func(k string) string { return map[string]string{"READER_TOKENS": "short"}[k] }
	if err := readercmd.Run(context.Background(), []string{"reader"}, short, io.Discard, io.Discard); err == nil || strings.Contains(err.Error(), "short") {
		t.Fatalf("a short token: %v (the error must not repeat it)", err)
	}
}

// TestReaderAPI drives the reader binary over HTTP against a real
// ClickHouse: who may read, every endpoint's answer, the errors.
func TestReaderAPI(t *testing.T) {
	t.Parallel()
	s := seed(t)
	base := startReader(t, s.cfg, map[string]string{"CLICKHOUSE_HTTP_URL": clickhousetest.HTTPURL(t)})

	t.Run("tokens", func(t *testing.T) {
		for _, token := range []string{"", "not-the-token-0123456789"} {
			resp, body := get(t, base+"/v1/jobs", token)
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"error":"unauthorized"`) ||
				!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("token %q: %d %s", token, resp.StatusCode, body)
			}
		}
		for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
			if resp, body := get(t, base+path, ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("%s without a token: %d %s", path, resp.StatusCode, body)
			}
		}
	})
	t.Run("search", func(t *testing.T) {
		var got []string
		next := ""
		for range 10 {
			var a reader.SearchAnswer
			getJSON(t, base+"/v1/search?q=alpha&job="+s.jobA+"&limit=3&cursor="+url.QueryEscape(next), http.StatusOK, &a)
			for _, h := range a.Hits {
				got = append(got, h.URL)
			}
			if next = a.Next; next == "" {
				break
			}
		}
		if len(got) != 4 || got[1] != "https://r.example/2" {
			t.Fatalf("hits %v", got)
		}
		var a reader.SearchAnswer
		getJSON(t, base+"/v1/search?q=%22page+line%22&change=changed", http.StatusOK, &a)
		if len(a.Hits) != 1 || a.Hits[0].JobID != s.jobB || a.Hits[0].Change != "changed" {
			t.Fatalf("phrase and change: %+v", a.Hits)
		}
	})
	t.Run("errors name the parameter", func(t *testing.T) {
		for _, tc := range []struct{ query, param string }{
			{"/v1/search?status=abc", "status"},
			{"/v1/search?from=yesterday", "from"},
			{"/v1/search?q=alpha&cursor=forged.cursor", "cursor"},
			{"/v1/search?limit=1000", "limit"},
			{"/v1/search?jb=" + s.jobA, "jb"},
			{"/v1/search?q=a&q=b", "q"},
			{"/v1/jobs/not-a-uuid", "job"},
			{"/v1/pages?url=", "url"},
			{"/v1/pages/diff?url=x&from=nope", "from"},
			{"/v1/jobs/" + s.jobA + "/export?format=zip", "format"},
			{"/v1/jobs/" + s.jobA + "/export?format=warc&revisits=all", "revisits"},
		} {
			var e reader.ErrorBody
			getJSON(t, base+tc.query, http.StatusBadRequest, &e)
			if e.Error != "invalid_parameter" || e.Parameter != tc.param || e.Message == "" {
				t.Errorf("%s: %+v, want parameter %s", tc.query, e, tc.param)
			}
		}
		var e reader.ErrorBody
		getJSON(t, base+"/v1/pages?url=https://nowhere.example/", http.StatusNotFound, &e)
		getJSON(t, base+"/v1/jobs/"+uuid.NewString(), http.StatusNotFound, &e)
		getJSON(t, base+"/v1/nothing", http.StatusNotFound, &e)
		if e.Error != "not_found" {
			t.Fatalf("unknown path: %+v", e)
		}
	})
	t.Run("page, history, diff", func(t *testing.T) {
		var p reader.PageAnswer
		getJSON(t, base+"/v1/pages?url="+url.QueryEscape("https://r.example/0"), http.StatusOK, &p)
		if p.JobID != s.jobB || p.Markdown != "alpha page\n\nline changed" || p.HTML == nil || *p.HTML != "<p>alpha 2</p>" {
			t.Fatalf("page %+v", p)
		}
		getJSON(t, base+"/v1/pages?url="+url.QueryEscape("https://r.example/0")+"&job="+s.jobA, http.StatusOK, &p)
		if p.JobID != s.jobA {
			t.Fatalf("page of job A: %+v", p)
		}
		evil := url.QueryEscape(`https://r.example/"><script>alert(1)</script>`)
		resp, body := get(t, base+"/v1/pages?format=html&url="+evil, testToken)
		if resp.StatusCode != 200 || string(body) != "<script>window.pwned=1</script><p>evil</p>" ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("html: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		resp, body = get(t, base+"/v1/pages?format=document&url="+url.QueryEscape("https://r.example/1"), testToken)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"markdown":"alpha page\n\nline https://r.example/1"`)) {
			t.Fatalf("document: %d %s", resp.StatusCode, body)
		}
		var h reader.HistoryAnswer
		getJSON(t, base+"/v1/pages/history?url="+url.QueryEscape("https://r.example/0"), http.StatusOK, &h)
		if len(h.Versions) != 2 || h.Versions[0].Change != "new" || h.Versions[1].Change != "changed" || *h.Versions[1].PreviousJobID != s.jobA {
			t.Fatalf("history %+v", h)
		}
		var d reader.DiffAnswer
		getJSON(t, base+"/v1/pages/diff?url="+url.QueryEscape("https://r.example/0"), http.StatusOK, &d)
		if !d.Changed || d.From.JobID != s.jobA || d.To.JobID != s.jobB || !strings.Contains(d.Unified, "-line https://r.example/0\n+line changed\n") {
			t.Fatalf("diff %+v", d)
		}
	})
	t.Run("jobs", func(t *testing.T) {
		var l reader.JobsAnswer
		getJSON(t, base+"/v1/jobs?limit=1", http.StatusOK, &l)
		if len(l.Jobs) != 1 || l.Jobs[0].JobID != s.jobB || l.Next == "" {
			t.Fatalf("jobs %+v", l)
		}
		var l2 reader.JobsAnswer
		getJSON(t, base+"/v1/jobs?limit=1&cursor="+url.QueryEscape(l.Next), http.StatusOK, &l2)
		if len(l2.Jobs) != 1 || l2.Jobs[0].JobID != s.jobA || l2.Next != "" {
			t.Fatalf("jobs, page 2: %+v", l2)
		}
		var j reader.JobAnswer
		getJSON(t, base+"/v1/jobs/"+s.jobA, http.StatusOK, &j)
		if j.Failures != 1 || j.CancelledPages != 1 || len(j.TopErrors) != 1 || j.TopErrors[0].Error != "timeout reaching the page" || j.SuccessfulPages != 4 {
			t.Fatalf("job %+v", j)
		}
		var f reader.FailuresAnswer
		getJSON(t, base+"/v1/jobs/"+s.jobA+"/failures?reason=failed", http.StatusOK, &f)
		if len(f.Failures) != 1 || f.Failures[0].URL != "https://r.example/broken" {
			t.Fatalf("failures %+v", f)
		}
		getJSON(t, base+"/v1/jobs/"+s.jobA+"/cancelled", http.StatusOK, &f)
		if len(f.Failures) != 1 || f.Failures[0].URL != "https://r.example/never" || f.Failures[0].Reason != "cancelled" {
			t.Fatalf("cancelled %+v", f)
		}
		var b reader.BlockedAnswer
		getJSON(t, base+"/v1/jobs/"+s.jobA+"/blocked", http.StatusOK, &b)
		if len(b.URLs) != 1 || b.URLs[0] != "https://r.example/private" {
			t.Fatalf("blocked %+v", b)
		}
	})
	t.Run("changes", func(t *testing.T) {
		ids := map[string]bool{}
		next := ""
		for range 10 {
			var c reader.ChangesAnswer
			getJSON(t, base+"/v1/changes?limit=3&cursor="+url.QueryEscape(next), http.StatusOK, &c)
			for _, ch := range c.Changes {
				if ids[ch.ID] {
					t.Fatalf("%s twice", ch.ID)
				}
				ids[ch.ID] = true
			}
			next = c.Next
		}
		// Seven pages (the failed one and the cancelled one have pages
		// rows too: their Documents) and two failures.
		if len(ids) != 9 {
			t.Fatalf("changes: %d rows: %v", len(ids), ids)
		}
	})
	t.Run("exports", func(t *testing.T) {
		resp, body := get(t, base+"/v1/jobs/"+s.jobA+"/export", testToken)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || bytes.Count(body, []byte("\n")) != 6 {
			t.Fatalf("ndjson: %d %v %d lines", resp.StatusCode, resp.Header, bytes.Count(body, []byte("\n")))
		}
		// A .warc.gz: gzipped records, not a gzipped transfer.
		resp, body = get(t, base+"/v1/jobs/"+s.jobA+"/export?format=warc", testToken)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" || !strings.HasSuffix(resp.Header.Get("Content-Disposition"), `.warc.gz"`) {
			t.Fatalf("warc: %d %v", resp.StatusCode, resp.Header)
		}
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err != nil {
			t.Fatalf("warc: not gzip: %v", err)
		} else if text, err := io.ReadAll(zr); err != nil || !bytes.HasPrefix(text, []byte("WARC/1.1\r\nWARC-Type: warcinfo")) {
			t.Fatalf("warc: %v %.100s", err, text)
		}
		// Its index, as a download of its own, points into the WARC just
		// downloaded: the export is the same bytes each time.
		warc := body
		resp, body = get(t, base+"/v1/jobs/"+strings.ToUpper(s.jobA)+"/export?format=cdxj", testToken)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/cdxj" || !strings.HasSuffix(resp.Header.Get("Content-Disposition"), `"job-`+s.jobA+`.cdxj"`) {
			t.Fatalf("cdxj: %d %v", resp.StatusCode, resp.Header)
		}
		checkIndexPointsInto(t, body, warc, "job-"+s.jobA+".warc.gz")
		resp, body = get(t, base+"/v1/jobs/"+s.jobA+"/export?format=wacz", testToken)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/wacz" || !bytes.HasPrefix(body, []byte("PK\x03\x04")) {
			t.Fatalf("wacz: %d %v %.20q", resp.StatusCode, resp.Header, body)
		}
		// Compressed on request, the same bytes once decoded.
		plain := getEncoded(t, base+"/v1/jobs/"+s.jobA+"/export", "identity", "")
		for _, tc := range []struct{ accept, encoding string }{
			{"gzip", "gzip"}, {"br, zstd;q=0.5, gzip", "zstd"}, {"zstd;q=0, gzip;q=0", ""}, {"", ""},
		} {
			if got := getEncoded(t, base+"/v1/jobs/"+s.jobA+"/export", tc.accept, tc.encoding); !bytes.Equal(got, plain) || len(plain) == 0 {
				t.Fatalf("Accept-Encoding %q: %d bytes decoded, want the %d plain ones", tc.accept, len(got), len(plain))
			}
		}
		if warc := getEncoded(t, base+"/v1/jobs/"+s.jobA+"/export?format=warc", "zstd", "zstd"); !bytes.HasPrefix(warc, []byte{0x1f, 0x8b}) {
			t.Fatalf("warc under zstd: %.20q, want the .warc.gz", warc)
		}
		resp, body = get(t, base+"/v1/jobs/"+s.jobA+"/export?format=parquet", testToken)
		if resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte("PAR1")) {
			t.Fatalf("parquet: %d %.100s", resp.StatusCode, body)
		}
		var e reader.ErrorBody
		getJSON(t, base+"/v1/jobs/"+uuid.NewString()+"/export", http.StatusNotFound, &e)
	})
	t.Run("metrics", func(t *testing.T) {
		_, body := get(t, base+"/metrics", "")
		for _, want := range []string{`crawlhouse_reader_requests_total{code="401",route="/v1/jobs"}`, `crawlhouse_reader_export_bytes_total{format="warc"}`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

// TestOpenAccessAndNoParquet: READER_OPEN_ACCESS serves without a token;
// without CLICKHOUSE_HTTP_URL the Parquet export answers 501.
func TestOpenAccessAndNoParquet(t *testing.T) {
	t.Parallel()
	s := seed(t)
	base := startReader(t, s.cfg, map[string]string{"READER_TOKENS": "", "READER_OPEN_ACCESS": "true"})
	resp, body := get(t, base+"/v1/jobs/"+s.jobA, "")
	if resp.StatusCode != 200 {
		t.Fatalf("open access: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, base+"/v1/jobs/"+s.jobA+"/export?format=parquet", "")
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "CLICKHOUSE_HTTP_URL") {
		t.Fatalf("parquet without the HTTP interface: %d %s", resp.StatusCode, body)
	}
}

// getEncoded GETs url with Accept-Encoding accept (set by hand, so that the
// client does not decode for the test), requires the answer's
// Content-Encoding to be encoding, and returns the body decoded.
func getEncoded(t *testing.T, url, accept, encoding string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Accept-Encoding", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != encoding {
		t.Fatalf("Accept-Encoding %q: %d, Content-Encoding %q, want %q", accept, resp.StatusCode, resp.Header.Get("Content-Encoding"), encoding)
	}
	var body io.Reader = resp.Body
	switch encoding {
	case "gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = zr
	case "zstd":
		zr, err := zstd.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("Accept-Encoding %q: %v", accept, err)
	}
	return b
}

// checkIndexPointsInto checks that each line of a CDXJ index names the
// WARC file and points at one gzip member of it: a record of the line's
// URL (a markdown line's without its urn:markdown: prefix).
func checkIndexPointsInto(t *testing.T, index, warc []byte, file string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(index), "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("cdxj: %q", index)
	}
	for _, l := range lines {
		_, js, _ := strings.Cut(l[strings.IndexByte(l, ' ')+1:], " ")
		var e struct{ URL, Offset, Length, Filename string }
		if err := json.Unmarshal([]byte(js), &e); err != nil || e.Filename != file {
			t.Fatalf("cdxj line %q: %v", l, err)
		}
		off, _ := strconv.Atoi(e.Offset)
		n, _ := strconv.Atoi(e.Length)
		if off < 0 || n <= 0 || off+n > len(warc) {
			t.Fatalf("cdxj line %q: outside the %d bytes of the WARC", l, len(warc))
		}
		zr, err := gzip.NewReader(bytes.NewReader(warc[off : off+n]))
		if err != nil {
			t.Fatalf("cdxj line %q: no gzip member there: %v", l, err)
		}
		zr.Multistream(false)
		rec, err := io.ReadAll(zr)
		if err != nil || !bytes.Contains(rec, []byte("\r\nWARC-Target-URI: "+strings.TrimPrefix(e.URL, "urn:markdown:")+"\r\n")) {
			t.Fatalf("cdxj line %q: the member there is not its record (%v): %.300q", l, err, rec)
		}
	}
}
