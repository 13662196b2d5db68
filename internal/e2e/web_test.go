package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"github.com/crawlhouse/crawlhouse/internal/readercmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/google/uuid"
)

// hostileBody is a crawl.page delivery of a page whose title, markdown
// and html carry script (browsertest's hostile corpus).
func hostileBody(t *testing.T, crawl, pageURL, beacon string, changed bool) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"success": true, "type": "crawl.page", "id": crawl, "webhookId": uuid.NewString(),
		"data": []any{map[string]any{
			"markdown": browsertest.HostileMarkdown(beacon, changed),
			"html":     browsertest.HostileHTML(beacon),
			"metadata": map[string]any{"title": browsertest.HostileTitle, "sourceURL": pageURL, "url": pageURL, "statusCode": 200, "scrapeId": uuid.NewString()},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostileFailure is a failed page whose error text carries script.
func hostileFailure(t *testing.T, crawl, pageURL string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"success": false, "type": "crawl.page", "id": crawl, "webhookId": uuid.NewString(),
		"data":  []any{map[string]any{"metadata": map[string]any{"sourceURL": pageURL, "statusCode": 500}}},
		"error": browsertest.HostileError,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const readerToken = "e2e-reader-token-0123456789"

// startReader runs the reader binary in process, as users start it, on
// the pipeline's database; its logs go to logs. It returns its base URL.
func (p *pipeline) startReader(t *testing.T, logs io.Writer) string {
	t.Helper()
	e := env{
		"READER_LISTEN":       "127.0.0.1:0",
		"CLICKHOUSE_ADDR":     p.chAddr,
		"CLICKHOUSE_DATABASE": p.db,
		"READER_TOKENS":       readerToken,
		"READER_CURSOR_KEY":   "the cursor key of an e2e test",
		"LOG_LEVEL":           "warn",
		// The pages' answers are under test, not their time: on a busy
		// machine a page past the default deadlines is no finding.
		"READER_QUERY_MAX_TIME":   "2m",
		"READER_REQUEST_MAX_TIME": "5m",
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- readercmd.RunWithOptions(ctx, []string{"reader"}, e.get, logs, io.Discard, readercmd.Options{Ready: func(a string) { ready <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reader: %v", err)
		}
	})
	select {
	case addr := <-ready:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("reader did not start: %v", err)
	}
	return ""
}

// readerGet GETs a path of the reader with its token.
func readerGet(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+readerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestWebPagesInABrowser archives two crawls of a hostile page (and a
// hostile failure) through the receiver and the sink into ClickHouse,
// starts the reader, and clicks through its web pages in Chromium as a
// reader does: signs in through the form, search finds the
// page, its history shows both versions, the sandboxed html and the diff
// render, the job and its failures show; and nothing of the crawled
// content runs or reaches another host.
func TestWebPagesInABrowser(t *testing.T) {
	b := browsertest.Start(t)
	bc := browsertest.StartBeacon(t)
	p := newPipeline(t, "")
	hook := p.startReceiver(t, nil)
	p.startSink(t, nil)
	_, logged := logtest.WithoutSecret(t, readerToken)
	readerURL := p.startReader(t, logged)
	base := readerURL + web.DefaultBase

	const pageURL = "https://example.org/hostile"
	first, second := uuid.NewString(), uuid.NewString()
	archived := func(job string) func() bool {
		return func() bool {
			status, _ := readerGet(t, readerURL+"/v1/pages?"+url.Values{"url": {pageURL}, "job": {job}}.Encode())
			return status == http.StatusOK
		}
	}
	mustDeliver(t, hook, hostileBody(t, first, pageURL, bc.URL, false))
	mustDeliver(t, hook, hostileFailure(t, first, "https://example.org/broken"))
	// The second crawl starts after the first is archived, so that the
	// history puts them in this order.
	waitFor(t, time.Minute, "the first crawl's page archived", archived(first))
	mustDeliver(t, hook, hostileBody(t, second, pageURL, bc.URL, true))
	waitFor(t, time.Minute, "the second crawl's page archived", archived(second))

	if status, body := readerGet(t, base+"/jobs"); status != http.StatusOK || !strings.Contains(body, first[:8]) {
		t.Fatalf("GET /ui/jobs with the token: %d\n%s", status, body)
	}
	b.Do(t,
		chromedp.Navigate(base+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`form.login input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`form.login input[name=token]`), readerToken),
		chromedp.Submit(chromedp.CSS(`form.login input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.list`)),
	)
	browsertest.ClickThrough(t, b, base, pageURL, bc, logged.String)

	waitFor(t, time.Minute, "the failure archived", func() bool {
		status, body := readerGet(t, readerURL+"/v1/jobs/"+first+"/failures")
		return status == http.StatusOK && strings.Contains(body, "example.org/broken")
	})
	b.Do(t,
		chromedp.Navigate(base+"/jobs/"+first),
		chromedp.WaitVisible(chromedp.CSS(`dl.facts`)),
		chromedp.Click(chromedp.CSS(`a[href$="/failures?job=`+first+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.failures`)),
	)
	shown := browsertest.Run(t, b, chromedp.Text(chromedp.CSS(`table.failures td.error-text`)))
	if shown != browsertest.HostileError {
		t.Errorf("the failure's error shows as %q, want the text %q", shown, browsertest.HostileError)
	}
	browsertest.AssertNothingRan(t, b, bc)

	// The query layer's refusals reach the reader as the pages' answers,
	// in the words of the read API's (reader.OutcomeOf); without the
	// token, the pages ask for it.
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/search?q=zebrafish&cursor=forged", http.StatusBadRequest, "parameter cursor"},
		{"/jobs/" + uuid.NewString(), http.StatusNotFound, "crawl not in the archive"},
		{"/page?" + url.Values{"url": {"https://example.org/never"}}.Encode(), http.StatusNotFound, "no archived version of the URL"},
		{"/diff?" + url.Values{"url": {pageURL}, "from": {second}, "to": {first}}.Encode(), http.StatusOK, `<mark class="word">now </mark>is`},
	} {
		if status, body := readerGet(t, base+tc.path); status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d, want %d with %q:\n%s", tc.path, status, tc.status, tc.want, body)
		}
	}
	resp, err := http.Get(base + "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /ui/jobs without the token: %d", resp.StatusCode)
	}
}
