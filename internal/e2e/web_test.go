package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
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

// TestWebPagesInABrowser archives two crawls of a hostile page (and a
// hostile failure) through the receiver and the sink into ClickHouse, and
// clicks through the web pages over that archive in Chromium, as a reader
// does: search finds the page, its history shows both versions, the
// sandboxed html and the diff render, the job and its failures show; and
// nothing of the crawled content runs or reaches another host.
func TestWebPagesInABrowser(t *testing.T) {
	b := browsertest.Start(t)
	bc := browsertest.StartBeacon(t)
	p := newPipeline(t, "")
	hook := p.startReceiver(t, nil)
	p.startSink(t, nil)
	reader, err := archive.NewReader(p.conn, archive.Config{Addr: p.chAddr, Database: p.db})
	if err != nil {
		t.Fatal(err)
	}
	if reader, err = reader.WithReadOptions(archive.ReadOptions{}); err != nil {
		t.Fatal(err)
	}

	const pageURL = "https://example.org/hostile"
	first, second := uuid.NewString(), uuid.NewString()
	archived := func(job string) func() bool {
		return func() bool {
			_, err := reader.Page(t.Context(), pageURL, job, archive.PageParts{})
			return err == nil
		}
	}
	mustDeliver(t, hook, hostileBody(t, first, pageURL, bc.URL, false))
	mustDeliver(t, hook, hostileFailure(t, first, "https://example.org/broken"))
	// The second crawl starts after the first is archived, so that the
	// history puts them in this order.
	waitFor(t, time.Minute, "the first crawl's page archived", archived(first))
	mustDeliver(t, hook, hostileBody(t, second, pageURL, bc.URL, true))
	waitFor(t, time.Minute, "the second crawl's page archived", archived(second))

	queries, err := web.NewArchive(reader)
	if err != nil {
		t.Fatal(err)
	}
	logged := &logtest.Buffer{}
	pages, err := web.New(queries, web.Options{Base: web.DefaultBase, Logger: zerolog.New(logged)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(pages)
	t.Cleanup(srv.Close)
	base := srv.URL + web.DefaultBase

	browsertest.ClickThrough(t, b, base, pageURL, bc, logged.String)

	waitFor(t, time.Minute, "the failure archived", func() bool {
		f, err := reader.Failures(t.Context(), archive.FailuresQuery{Job: first})
		return err == nil && len(f.Failures) == 1
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

	// The query layer's refusals reach the reader as the pages' answers.
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/search?q=zebrafish&cursor=forged", http.StatusBadRequest, "parameter cursor"},
		{"/jobs/" + uuid.NewString(), http.StatusNotFound, "Not in the archive"},
		{"/page?" + url.Values{"url": {"https://example.org/never"}}.Encode(), http.StatusNotFound, "Not in the archive"},
		{"/diff?" + url.Values{"url": {pageURL}, "from": {second}, "to": {first}}.Encode(), http.StatusOK, "now is"},
	} {
		resp, err := http.Get(base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: %d, want %d with %q:\n%s", tc.path, resp.StatusCode, tc.status, tc.want, body)
		}
	}
}
