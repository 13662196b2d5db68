package readercmd_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
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

// An archived page whose html asks the browser to reach other hosts every
// way a document can (browsertest.HostileHints: resource hints, head
// elements, resources) makes no connection to any of them when a reader
// signs in through the form and opens it in the sandbox. The hosts are
// listeners on another loopback address and on a name (*.localhost is the
// loopback); a page of the test's own with a preconnect shows that this
// browser does make the connection a hint asks for.
func TestWebSandboxReachesNoHost(t *testing.T) {
	t.Parallel()
	b := browsertest.Start(t)
	other := browsertest.StartListener(t, "127.0.0.2:0")
	named := browsertest.StartListener(t, "127.0.0.1:0")
	origins := []string{"http://" + other.HostPort(), "https://" + other.HostPort(), "http://hints.localhost:" + strconv.Itoa(named.Port())}

	cfg, w := archiveDB(t)
	const pageURL = "https://r.example/hints"
	deliver(t, w, pageBody(uuid.NewString(), pageURL, "Hints", "hints page", browsertest.HostileHints(origins...), 200), time.Now())
	base := startReader(t, cfg, nil)

	// Signed out, the page asks for the token; the form posts it and
	// returns to the page.
	b.Do(t,
		chromedp.Navigate(base+"/ui/page?"+url.Values{"url": {pageURL}}.Encode()),
		chromedp.WaitVisible(chromedp.CSS(`form.login input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`form.login input[name=token]`), testToken),
		chromedp.Submit(chromedp.CSS(`form.login input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`section.history`)),
		chromedp.Click(chromedp.CSS(`details.html-rendered summary`)),
		chromedp.WaitVisible(chromedp.CSS(`iframe.html-preview`)),
	)
	if u := browsertest.Run(t, b, chromedp.Location()); strings.Contains(u, testToken) {
		t.Errorf("the token is in the address: %s", u)
	}

	// The control, in a tab of its own while the page stays open: a
	// sandboxed srcdoc with a preconnect, as the page's was before the
	// pages kept hints out of it. By the time its connection is made, the
	// page's iframe, parsed earlier, has had as long to make its own.
	control := browsertest.StartListener(t, "127.0.0.1:0")
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<!doctype html><iframe sandbox srcdoc="<link rel=preconnect href=http://` + control.HostPort() + `>control"></iframe><p>control</p>`))
	}))
	t.Cleanup(page.Close)
	tab, closeTab := chromedp.NewContext(b.Context())
	defer closeTab()
	ctx, cancel := context.WithTimeout(tab, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(page.URL), chromedp.WaitVisible(chromedp.CSS(`p`))); err != nil {
		t.Fatal(err)
	}
	browsertest.WaitFor(t, "the control page's preconnect", func() bool { return control.Connections() > 0 })

	if n, m := other.Connections(), named.Connections(); n+m > 0 {
		t.Errorf("the archived html made the browser connect to other hosts: %d connections to %s, %d to %s", n, other.HostPort(), m, origins[2])
	}
}

// A page whose markdown goldmark would spend minutes on (a megabyte of
// unclosed links, of nested quotes) is answered at once by the real
// reader, its markdown shown as escaped text.
func TestWebCostlyMarkdownShownAsText(t *testing.T) {
	t.Parallel()
	cfg, w := archiveDB(t)
	job := uuid.NewString()
	shapes := map[string]string{
		"https://r.example/links":  strings.Repeat("[a](", (1<<20-4096)/4),
		"https://r.example/quotes": strings.Repeat(">", 1<<20-4096),
	}
	for u, md := range shapes {
		deliver(t, w, pageBody(job, u, "Costly", md, "", 200), time.Now())
	}
	base := startReader(t, cfg, nil)
	for u, md := range shapes {
		resp, body := get(t, base+"/ui/page?"+url.Values{"url": {u}}.Encode(), testToken)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "too costly to render") ||
			!strings.Contains(string(body), `<pre class="source">`+html.EscapeString(md[:64])) {
			t.Errorf("%s: %d\n%.2000s", u, resp.StatusCode, body)
		}
	}
}

// A person who types the reader's address lands on the pages.
func TestRootLeadsToThePages(t *testing.T) {
	t.Parallel()
	cfg, _ := archiveDB(t)
	base := startReader(t, cfg, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /: %d, Location %q; want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
}
