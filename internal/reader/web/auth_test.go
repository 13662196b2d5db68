package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
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
	if resp := do(t, srv, postLogin(t, srv.URL, url.Values{"token": {"wrong-token-of-some-length"}}, nil)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", resp.StatusCode)
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

	// A token in the URL (the sign-in link `make run` used to print) is
	// refused, whatever the method: it would stay in the history.
	resp := do(t, srv, mustRequest(t, srv.URL+base+"/login?"+url.Values{"token": {token}, "next": {base + "/search"}}.Encode()))
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 || !strings.Contains(string(body), "never taken from the address") ||
		!strings.Contains(string(body), `name="next" value="`+base+`/search"`) {
		t.Errorf("login link: %d, cookies %v\n%s", resp.StatusCode, resp.Cookies(), body)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+base+"/login?token="+token, strings.NewReader(url.Values{"next": {jobPath}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp := do(t, srv, req); resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
		t.Errorf("form posted to a URL with the token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	// The form of another site cannot sign a reader in.
	if resp := do(t, srv, postLogin(t, srv.URL, url.Values{"token": {token}}, http.Header{"Sec-Fetch-Site": {"cross-site"}})); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("cross-site sign-in: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}

	req = mustRequest(t, srv.URL+jobPath)
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

func postLogin(t *testing.T, srvURL string, form url.Values, h http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srvURL+base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// The cookie is Secure whenever the browser reached the pages over TLS:
// on a TLS connection, or through a proxy that terminated TLS and says so,
// or as the browser's Origin says; over plain http it is not (a browser
// would not send it back).
func TestLoginCookieSecureOverTLS(t *testing.T) {
	t.Parallel()
	tokens, err := verify.NewTokens([]string{token})
	if err != nil {
		t.Fatal(err)
	}
	s, err := web.New(&archivetest.Archive{}, web.Options{Base: base, Logger: zerolog.Nop(), Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	plain, tls := httptest.NewServer(s), httptest.NewTLSServer(s)
	t.Cleanup(plain.Close)
	t.Cleanup(tls.Close)
	for _, tc := range []struct {
		name   string
		srv    *httptest.Server
		header http.Header
		secure bool
	}{
		{"plain http", plain, nil, false},
		{"plain http, an http Origin", plain, http.Header{"Origin": {plain.URL}, "Sec-Fetch-Site": {"same-origin"}}, false},
		{"plain http, X-Forwarded-Proto http", plain, http.Header{"X-Forwarded-Proto": {"http"}}, false},
		{"TLS", tls, nil, true},
		{"a proxy's X-Forwarded-Proto", plain, http.Header{"X-Forwarded-Proto": {"https"}}, true},
		{"proxies' X-Forwarded-Proto", plain, http.Header{"X-Forwarded-Proto": {"HTTPS, http"}}, true},
		{"a proxy's Forwarded", plain, http.Header{"Forwarded": {`for=192.0.2.1;proto="https";host=reader.example`}}, true},
		{"the browser's https Origin", plain, http.Header{"Origin": {"https://reader.example"}, "Sec-Fetch-Site": {"same-origin"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, tc.srv, postLogin(t, tc.srv.URL, url.Values{"token": {token}}, tc.header))
			cookies := resp.Cookies()
			if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || cookies[0].Secure != tc.secure {
				t.Fatalf("%d, cookies %+v, want Secure %v", resp.StatusCode, cookies, tc.secure)
			}
		})
	}
}

// The sign-in form asks the browser for its Origin (same-origin
// referrer policy); every other page sends no referrer.
func TestLoginReferrerPolicy(t *testing.T) {
	t.Parallel()
	srv, _ := startPagesWithToken(t)
	a := get(t, srv, base+"/jobs")
	if a.status != http.StatusUnauthorized || a.header.Get("Referrer-Policy") != "same-origin" || !strings.Contains(a.body, `<meta name="referrer" content="same-origin">`) {
		t.Errorf("sign-in form: %d, Referrer-Policy %q", a.status, a.header.Get("Referrer-Policy"))
	}
	a = get(t, srv, base+"/static/style.css")
	if a.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("stylesheet: Referrer-Policy %q", a.header.Get("Referrer-Policy"))
	}
}
