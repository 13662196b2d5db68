// Package replaytest replays a web archive in the replay tool archivists
// use, webrecorder's ReplayWeb.page, in headless Chromium, and tells what
// it shows: the test of an export is then that a person opening the file
// in that tool sees each page, not only that the file parses.
//
//	r := replaytest.Start(t, "job.warc.gz", warc)
//	got := r.Open(t, "https://site.example/a", "")
//	// got.Status, got.Text, got.HTML: the replayed document's
//
// Start serves, on 127.0.0.1 (a secure context, which service workers
// need; file:// is not one), an embed page holding ReplayWeb.page's
// <replay-web-page> element, the tool's ui.js and sw.js (the npm package
// internal/testkit/archivetools finds) under /replay/, and the archive
// itself (with Range requests, which the tool uses on a WACZ), and
// installs the tool's service worker. The tool then loads and indexes the
// archive in the browser, and replays the URL asked for in an iframe nested in shadow
// roots and another iframe; Open waits for that document to have loaded
// (no sleep) and reads it through the frames, all of one origin here.
//
// The replayed document runs the archive's scripts, as the tool does for
// any user: the archives given here are the tests' own.
package replaytest

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetools"
	"github.com/crawlhouse/crawlhouse/internal/testkit/browsertest"
)

// openTimeout bounds one Open: a guard against a replay that never
// comes, not a measure of speed.
const openTimeout = time.Minute

// Replayer is one archive served to one browser.
type Replayer struct {
	b      *browsertest.Browser
	base   string
	source string
}

// Replay is what the tool shows for one URL: the replayed document as the
// browser loaded it.
type Replay struct {
	// Location is the document's address inside the tool
	// (…/w/{collection}/{timestamp}mp_/{url}).
	Location string `json:"location"`
	// Status is the HTTP status the tool answered the document with: the
	// archived response's, or the tool's own 404 for a URL it does not
	// hold.
	Status int `json:"status"`
	// Text is the document's body as text (innerText).
	Text string `json:"text"`
	// HTML is its markup, with what the tool injects to replay it.
	HTML string `json:"html"`
}

// Start serves archive, named name (its extension tells the tool the
// format: .warc.gz, .warc or .wacz), with the replay tool to a fresh
// headless Chromium, until t ends. Without the tool or the browser it
// skips t, or fails it under CI=true.
func Start(t testing.TB, name string, archive []byte) *Replayer {
	t.Helper()
	dir := archivetools.ReplayDir(t)
	b := browsertest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("replaytest: listen: %v", err)
	}
	base := "http://" + ln.Addr().String()
	r := &Replayer{b: b, base: base, source: base + "/archive/" + url.PathEscape(name)}
	srv := &http.Server{Handler: r.handler(dir, name, archive), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("replaytest: serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	r.installWorker(t)
	return r
}

// installWorker registers the tool's service worker as its embed does
// (the same script URL and scope) and waits until it is active. The embed
// goes on once the worker is registered, not active: on a first visit its
// frame may then load before the worker serves it (a race the tool has
// with any new visitor, which a busy machine loses).
func (r *Replayer) installWorker(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(r.b.Context(), openTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(r.base+"/blank")); err != nil {
		t.Fatalf("replaytest: open a page of the server: %v", err)
	}
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(async () => {
		const reg = await navigator.serviceWorker.register('/replay/sw.js?serveIndex=1', {scope: '/replay/'});
		const sw = reg.installing || reg.waiting || reg.active;
		if (sw.state !== 'activated') {
			await new Promise((resolve) => sw.addEventListener('statechange', () => { if (sw.state === 'activated') resolve(); }));
		}
		return true;
	})()`, func(p *runtime.EvaluateParams) { p.AwaitPromise = new(true) }))
	if err != nil {
		t.Fatalf("replaytest: install the tool's service worker: %v", err)
	}
}

// embedPage holds the tool's embed element, in its replay-only mode (the
// page without the tool's own navigation around it).
var embedPage = template.Must(template.New("embed").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>replay</title><script src="/replay/ui.js"></script></head>
<body><replay-web-page source="{{.Source}}" url="{{.URL}}"{{if .TS}} ts="{{.TS}}"{{end}} embed="replayonly" replaybase="/replay/"></replay-web-page></body></html>
`))

func (r *Replayer) handler(dir, name string, archive []byte) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /blank", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><title>blank</title>")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		q := req.URL.Query()
		_ = embedPage.Execute(w, map[string]string{"Source": r.source, "URL": q.Get("url"), "TS": q.Get("ts")})
	})
	// The app the embed frames is served by the service worker itself
	// (serveIndex), which loads ui.js beside it: both live under /replay/.
	for _, f := range []string{"ui.js", "sw.js"} {
		file := filepath.Join(dir, f)
		mux.HandleFunc("GET /replay/"+f, func(w http.ResponseWriter, req *http.Request) { http.ServeFile(w, req, file) })
	}
	modified := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mux.HandleFunc("GET /archive/{name}", func(w http.ResponseWriter, req *http.Request) {
		if req.PathValue("name") != name {
			http.NotFound(w, req)
			return
		}
		http.ServeContent(w, req, name, modified, bytes.NewReader(archive))
	})
	return mux
}

// replayedDocument finds, through shadow roots and iframes, the first
// document the tool replays (its address has the tool's "mp_/" modifier)
// once it has loaded, and describes it; null until then.
const replayedDocument = `() => {
	const docs = [];
	const walk = (root) => {
		for (const el of root.querySelectorAll('*')) {
			if (el.shadowRoot) walk(el.shadowRoot);
			if (el.tagName !== 'IFRAME') continue;
			let doc = null;
			try { doc = el.contentDocument; } catch (e) {}
			if (doc) { docs.push(doc); walk(doc); }
		}
	};
	walk(document);
	const doc = docs.find((d) => d.location.href.includes('mp_/') && d.readyState === 'complete' && d.body);
	if (!doc) return null;
	const nav = doc.defaultView.performance.getEntriesByType('navigation')[0];
	return {location: doc.location.href, status: nav ? nav.responseStatus : 0,
		text: doc.body.innerText, html: doc.documentElement.outerHTML};
}`

// whatTheToolShows is the text of every document and shadow root of the
// page, frames included: what a person would see of the tool (its
// loading state, its error report) when no replay came.
const whatTheToolShows = `(() => {
	const out = [];
	const walk = (root, where) => {
		if (root.body) out.push(where + ' ' + root.location.href + ': ' + root.body.innerText);
		for (const el of root.querySelectorAll('*')) {
			if (el.shadowRoot) { out.push(where + ' <' + el.localName + '>: ' + el.shadowRoot.textContent.replace(/\s+/g, ' ').slice(0, 500)); walk(el.shadowRoot, where + ' >'); }
			if (el.tagName !== 'IFRAME') continue;
			let doc = null;
			try { doc = el.contentDocument; } catch (e) {}
			if (doc) walk(doc, where + ' iframe');
		}
	};
	walk(document, 'page');
	return out.join('\n');
})()`

// Open replays target at timestamp ts (14 digits, or "" for the tool's
// choice: the capture nearest to now) in a fresh load of the embed page,
// and returns what the tool shows once the replayed document has loaded.
// A replay that never comes fails t, with what the browser reported.
func (r *Replayer) Open(t testing.TB, target, ts string) Replay {
	t.Helper()
	page := r.base + "/?" + url.Values{"url": {target}, "ts": {ts}}.Encode()
	ctx, cancel := context.WithTimeout(r.b.Context(), openTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("replaytest: open the embed page of %s: %v", target, err)
	}
	// Polled from here rather than in the page: the tool navigates its
	// frames while it starts, which ends a script waiting in them.
	for {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[*Replay]("("+replayedDocument+")()"))
		if err == nil && got != nil {
			return *got
		}
		select {
		case <-ctx.Done():
			for _, e := range r.b.Entries() {
				t.Logf("browser: %s", e)
			}
			dump, cancel := context.WithTimeout(r.b.Context(), 10*time.Second)
			defer cancel()
			shows, _ := chromedp.Run(dump, chromedp.Evaluate[string](whatTheToolShows))
			t.Fatalf("replaytest: %s never replayed (last: %v); the page shows:\n%s", target, err, shows)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
