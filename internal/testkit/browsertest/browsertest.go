// Package browsertest gives tests a real browser: Chromium, headless,
// driven over the DevTools protocol with chromedp. Tests of the web pages
// use it to click through them as a reader does and to see what the browser
// itself reports (console messages, Content-Security-Policy violations).
//
//	b := browsertest.Start(t)
//	b.Do(t, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main")))
//	title := browsertest.Run(t, b, chromedp.Title())
//	for _, e := range b.Violations() { ... }
//
// The browser is the Debian chromium package (scripts/browser.sh installs
// it; `make test` runs that first), or the binary CHROMIUM_PATH names. When
// none is found the test is skipped with the reason, and fails under
// CI=true: a missing dependency never passes silently there.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// EnvPath names the environment variable that may point at the Chromium
// binary to use.
const EnvPath = "CHROMIUM_PATH"

// runTimeout bounds one Run: a guard against a browser that hangs, not a
// measure of speed. Three minutes: on a busy CI machine a login and a page
// whose reads wait for the archive's read slots took over one.
const runTimeout = 3 * time.Minute

// Browser is one headless Chromium with one tab, for one test. It records
// every console message and log entry the pages produce.
type Browser struct {
	tab context.Context

	mu      sync.Mutex
	entries []Entry
}

// Entry is one message the browser reported: a log entry (Source
// "security" for Content-Security-Policy violations, "network", …), a
// console call (Source "console-api") or an uncaught exception (Source
// "exception").
type Entry struct {
	Source string
	Level  string
	Text   string
	URL    string
}

func (e Entry) String() string { return fmt.Sprintf("[%s %s] %s %s", e.Source, e.Level, e.Text, e.URL) }

// Path finds the Chromium binary: CHROMIUM_PATH, then the Debian package's
// /usr/bin/chromium, then chromium, chromium-browser or google-chrome on
// PATH. It returns "" when there is none.
func Path() string {
	if p := os.Getenv(EnvPath); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Start launches a fresh Chromium (its own profile in a temporary
// directory) for t and opens a tab; t's cleanup closes both. Without a
// browser it skips t, or fails it under CI=true.
func Start(t testing.TB) *Browser {
	t.Helper()
	path := Path()
	if path == "" {
		msg := "browsertest: no Chromium (run scripts/browser.sh, or set " + EnvPath + ")"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0], chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &Browser{}
	tab, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf), chromedp.WithListener(b.record))
	b.tab = tab
	// The first Do starts the browser; a browser that cannot start fails
	// the test whatever CI says: it was found, so it is expected to work.
	if err := chromedp.Do(tab); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("browsertest: start %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	return b
}

// Do runs steps in the tab, in order, and fails t on the first error.
func (b *Browser) Do(t testing.TB, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.tab, runTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// Run runs one action in b's tab and returns its value; it fails t on an
// error.
func Run[T any](t testing.TB, b *Browser, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.tab, runTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// Entries returns what the browser reported so far, in order.
func (b *Browser) Entries() []Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Entry(nil), b.entries...)
}

// Violations returns the Content-Security-Policy violations the browser
// reported so far.
func (b *Browser) Violations() []Entry {
	var out []Entry
	for _, e := range b.Entries() {
		if strings.Contains(e.Text, "Content Security Policy") {
			out = append(out, e)
		}
	}
	return out
}

func (b *Browser) record(ev any) {
	var e Entry
	switch ev := ev.(type) {
	case *log.EventEntryAdded:
		e = Entry{Source: string(ev.Entry.Source), Level: string(ev.Entry.Level), Text: ev.Entry.Text, URL: ev.Entry.URL}
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range ev.Args {
			parts = append(parts, string(a.Value))
		}
		e = Entry{Source: "console-api", Level: string(ev.Type), Text: strings.Join(parts, " ")}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		e = Entry{Source: "exception", Level: "error", Text: text, URL: d.URL}
	default:
		return
	}
	b.mu.Lock()
	b.entries = append(b.entries, e)
	b.mu.Unlock()
}

// Context is the tab's chromedp context, for calls this package does not
// wrap.
func (b *Browser) Context() context.Context { return b.tab }
