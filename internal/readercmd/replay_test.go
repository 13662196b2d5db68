package readercmd_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"mime"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/replaytest"
	"github.com/google/uuid"
)

// replayFormats are the export formats the replay test opens in the replay
// tool: the WACZ an archivist is handed for a job (the WARC with its index),
// and the WARC alone, which the tool indexes itself.
var replayFormats = []string{"wacz", "warc"}

// sitePage is one URL of the replay test's site, crawled twice: first a
// good page with html first, then (the recrawl) with html second and
// status (0: no HTTP answer at all; failed: a failed scrape).
type sitePage struct {
	path          string
	first, second string
	status        int
	failed        bool
}

// replaySite: three pages unchanged in the recrawl, one edited, one 404,
// one failed scrape (500, no html), one with no HTTP answer. No page has a
// script: the replay tool would run it.
var replaySite = []sitePage{
	{path: "/", first: "<h1>Home</h1><p>marker home</p>", second: "<h1>Home</h1><p>marker home</p>", status: 200},
	{path: "/about", first: "<h1>About</h1><p>marker about</p>", second: "<h1>About</h1><p>marker about</p>", status: 200},
	{path: "/docs/guide?page=2", first: "<h1>Guide</h1><p>marker guide</p>", second: "<h1>Guide</h1><p>marker guide</p>", status: 200},
	{path: "/news", first: "<h1>News</h1><p>marker news old</p>", second: "<h1>News</h1><p>marker news edited</p>", status: 200},
	{path: "/gone", first: "<h1>Gone</h1><p>marker gone before</p>", second: "<h1>Not here</h1><p>marker gone 404</p>", status: 404},
	{path: "/broken", first: "<h1>Broken</h1><p>marker broken before</p>", status: 500, failed: true},
	{path: "/nodns", first: "<h1>No DNS</h1><p>marker nodns before</p>", status: 0, failed: true},
}

// TestExportReplays: a site crawled twice, archived as the sink archives
// deliveries, and the recrawl's exports (replayFormats) fetched from the
// reader binary and opened in ReplayWeb.page in headless Chromium. Every
// good page of the recrawl replays from that file alone with its own html
// and a 200, the pages unchanged since the first crawl included (in an
// incremental export they would be revisits into the first job's file);
// the 404 replays as a 404 and the failed scrape as a 500, neither as a
// good page; the page with no HTTP answer is not in the file, and the
// first crawl's html of it does not replay.
func TestExportReplays(t *testing.T) {
	t.Parallel()
	cfg, w := archiveDB(t)
	const host = "https://replay-site.example"
	first, recrawl := uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for i, p := range replaySite {
		deliver(t, w, pageBody(first, host+p.path, "", marker(p.first), p.first, 200), t0.Add(time.Duration(i)*time.Second))
	}
	t1 := t0.Add(24 * time.Hour)
	for i, p := range replaySite {
		at := t1.Add(time.Duration(i) * time.Second)
		switch {
		case p.failed && p.status == 0:
			deliver(t, w, `{"success":false,"type":"crawl.page","id":"`+recrawl+`","webhookId":"`+uuid.NewString()+
				`","error":"dns","data":[{"markdown":"","metadata":{"url":"`+host+p.path+`","sourceURL":"`+host+p.path+`"}}]}`, at)
		case p.failed:
			deliver(t, w, failureBody(recrawl, host+p.path, "boom"), at)
		default:
			deliver(t, w, pageBody(recrawl, host+p.path, "", marker(p.second), p.second, p.status), at)
		}
	}
	base := startReader(t, cfg, nil)
	// The premise: the archive holds the three unchanged pages as
	// unchanged (an incremental export makes them revisits).
	if n := revisits(t, base+"/v1/jobs/"+recrawl+"/export?format=warc&revisits=previous"); n != 3 {
		t.Fatalf("the incremental export has %d revisit records, want 3 (the unchanged pages)", n)
	}

	for _, format := range replayFormats {
		t.Run(format, func(t *testing.T) { replayEveryPage(t, base+"/v1/jobs/"+recrawl+"/export?format="+format, host) })
	}
}

// replayEveryPage opens the export at url in the replay tool and checks
// every page of replaySite as the recrawl left it.
func replayEveryPage(t *testing.T, url, host string) {
	t.Helper()
	resp, body := get(t, url, testToken)
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d %s", resp.StatusCode, body)
	}
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	if err != nil || params["filename"] == "" {
		t.Fatalf("export: Content-Disposition %q: %v", resp.Header.Get("Content-Disposition"), err)
	}
	r := replaytest.Start(t, params["filename"], body)
	for _, p := range replaySite {
		got := r.Open(t, host+p.path, "")
		want, old := marker(p.second), marker(p.first)
		var ok bool
		switch {
		case p.status == 0: // not in the file: the tool's own 404
			ok = got.Status == 404 && !strings.Contains(got.Text, old)
		case p.failed: // its status, and no html of a good page
			ok = got.Status == p.status && !strings.Contains(got.Text, old)
		default: // its own status and html, not the first crawl's
			ok = got.Status == p.status && strings.Contains(got.Text, want) && (want == old || !strings.Contains(got.Text, old))
		}
		if !ok {
			t.Errorf("%s replays %d %q (at %s), want %d with %q", p.path, got.Status, got.Text, got.Location, p.status, want)
		}
	}
}

// marker is the text of a site page's html's paragraph (a NUL, which no
// replay shows, for no html).
func marker(html string) string {
	_, m, ok := strings.Cut(html, "<p>")
	if !ok {
		return "\x00"
	}
	m, _, _ = strings.Cut(m, "</p>")
	return m
}

// revisits counts the revisit records of the .warc.gz at url.
func revisits(t *testing.T, url string) int {
	t.Helper()
	resp, body := get(t, url, testToken)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("GET %s: not gzip: %v", url, err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return bytes.Count(text, []byte("\r\nWARC-Type: revisit\r\n"))
}
