package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/rs/zerolog"
)

const token = "a-reader-token-of-some-length"

func startPagesWithToken(t *testing.T) (*httptest.Server, [2]string) {
	t.Helper()
	tokens, err := verify.NewTokens([]string{token})
	if err != nil {
		t.Fatal(err)
	}
	arch, jobs := hostileArchive("http://127.0.0.1:9")
	s, err := web.New(arch, web.Options{Base: base, Logger: zerolog.Nop(), Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, jobs
}

func do(t *testing.T, srv *httptest.Server, req *http.Request) *http.Response {
	t.Helper()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// With tokens configured, every page asks for one; the login takes it from
// a form or a link, keeps it in a strict cookie and never sends the reader
// to another site.
func TestPagesAskForAToken(t *testing.T) {
	t.Parallel()
	srv, jobs := startPagesWithToken(t)
	jobPath := base + "/jobs/" + jobs[0]

	a := get(t, srv, jobPath)
	if a.status != http.StatusUnauthorized || !strings.Contains(a.body, `name="token"`) || strings.Contains(a.body, "<dl") ||
		!strings.Contains(a.body, `name="next" value="`+jobPath+`"`) {
		t.Fatalf("without a token: %d\n%s", a.status, a.body)
	}
	if a := get(t, srv, base+"/static/style.css"); a.status != http.StatusOK {
		t.Errorf("stylesheet without a token: %d", a.status)
	}
	if a := get(t, srv, base+"/login?token=wrong-token-of-some-length"); a.status != http.StatusUnauthorized || !strings.Contains(a.body, "not one of the reader") {
		t.Errorf("wrong token: %d\n%s", a.status, a.body)
	}

	for _, tc := range []struct{ next, want string }{
		{jobPath, jobPath},
		{"//evil.example/", base + "/jobs"},
		{"https://evil.example/", base + "/jobs"},
		{base + `/\evil.example`, base + "/jobs"},
		{"", base + "/jobs"},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+base+"/login", strings.NewReader(url.Values{"token": {token}, "next": {tc.next}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp := do(t, srv, req)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != tc.want {
			t.Errorf("login with next %q: %d to %q, want %q", tc.next, resp.StatusCode, resp.Header.Get("Location"), tc.want)
		}
		cookies := resp.Cookies()
		if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Path != base+"/" {
			t.Fatalf("cookie %+v", cookies)
		}
		req, _ = http.NewRequest(http.MethodGet, srv.URL+jobPath, nil)
		req.AddCookie(cookies[0])
		if resp := do(t, srv, req); resp.StatusCode != http.StatusOK {
			t.Errorf("with the cookie: %d", resp.StatusCode)
		}
	}

	// A link with the token (what `make run` prints) logs in and drops it
	// from the URL.
	resp := do(t, srv, mustRequest(t, srv.URL+base+"/login?"+url.Values{"token": {token}, "next": {base + "/search"}}.Encode()))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != base+"/search" {
		t.Errorf("login link: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	req := mustRequest(t, srv.URL+jobPath)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp := do(t, srv, req); resp.StatusCode != http.StatusOK {
		t.Errorf("with Authorization: %d", resp.StatusCode)
	}
	req = mustRequest(t, srv.URL+jobPath)
	req.AddCookie(&http.Cookie{Name: "crawlhouse_reader_token", Value: "wrong-token-of-some-length"})
	if resp := do(t, srv, req); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("with a wrong cookie: %d", resp.StatusCode)
	}
}

func mustRequest(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
