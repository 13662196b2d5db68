package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The real crawl API's deliveries, byte for byte with their headers, as its
// 2026 self-hosted sender made them (testdata/fixtures/firecrawl-2026, whose
// README says what each run shows). They are replayed through the receiver
// and the sink as users run them, with the default configuration: the
// sender's own signature header, the secret it was configured with.
const (
	realSecret   = "fc-harness-secret"
	realFixtures = "../../testdata/fixtures/firecrawl-2026"
)

// realDelivery is one captured POST.
type realDelivery struct {
	name    string
	body    []byte
	headers http.Header
	// Parsed with encoding/json alone, as the test's own reading of the
	// sender's bytes (never the product's decoder).
	event struct {
		Success   bool            `json:"success"`
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		JobID     string          `json:"jobId"` // the v0 API's name for id
		WebhookID string          `json:"webhookId"`
		Data      documents       `json:"data"`
		Error     string          `json:"error"`
		Metadata  json.RawMessage `json:"metadata"`
	}
}

// documents is data read as a list; data of another shape (a monitor
// event's object) reads as none.
type documents []json.RawMessage

func (d *documents) UnmarshalJSON(b []byte) error {
	var list []json.RawMessage
	if json.Unmarshal(b, &list) == nil {
		*d = list
	}
	return nil
}

// pageURL is the URL a page is archived under, read from the raw Document.
func pageURL(t *testing.T, doc json.RawMessage) (url string, status int, markdown string) {
	t.Helper()
	var d struct {
		Markdown string `json:"markdown"`
		Metadata struct {
			URL        string `json:"url"`
			SourceURL  string `json:"sourceURL"`
			StatusCode int    `json:"statusCode"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	url = d.Metadata.URL
	if url == "" {
		url = d.Metadata.SourceURL
	}
	return url, d.Metadata.StatusCode, d.Markdown
}

// readRun reads a run's deliveries in the order they arrived.
func readRun(t *testing.T, run string) []realDelivery {
	t.Helper()
	bodies, err := filepath.Glob(filepath.Join(realFixtures, run, "*.body"))
	if err != nil || len(bodies) == 0 {
		t.Fatalf("no deliveries in %s: %v", run, err)
	}
	sort.Strings(bodies)
	var out []realDelivery
	for _, b := range bodies {
		d := realDelivery{name: filepath.Base(b), body: readFile(t, b), headers: http.Header{}}
		sc := bufio.NewScanner(bytes.NewReader(readFile(t, strings.TrimSuffix(b, ".body")+".headers")))
		sc.Scan() // the request line
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
				d.headers.Add(k, v)
			}
		}
		if err := json.Unmarshal(d.body, &d.event); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		out = append(out, d)
	}
	return out
}

// replay POSTs a captured delivery with the sender's headers.
func replay(t *testing.T, url string, d realDelivery) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Content-Type", "X-Firecrawl-Signature", "User-Agent"} {
		req.Header.Set(k, d.headers.Get(k))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// archivedPage is one row of pages under FINAL.
type archivedPage struct {
	origin, webhookID, document, markdown, metadata string
	success                                         bool
	status                                          uint16
}

func (p *pipeline) pagesOf(t *testing.T, crawlID string) map[string]archivedPage {
	t.Helper()
	out, err := p.tryPagesOf(crawlID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryPagesOf is pagesOf for a wait: the sink may not have migrated yet.
func (p *pipeline) tryPagesOf(crawlID string) (map[string]archivedPage, error) {
	rows, err := p.conn.Query(context.Background(),
		"SELECT url, origin, toString(webhook_id), document, markdown, webhook_metadata, success, status_code FROM "+p.db+".pages FINAL WHERE crawl_id = ?",
		uuid.MustParse(crawlID))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]archivedPage{}
	for rows.Next() {
		var url string
		var a archivedPage
		if err := rows.Scan(&url, &a.origin, &a.webhookID, &a.document, &a.markdown, &a.metadata, &a.success, &a.status); err != nil {
			return nil, err
		}
		if _, dup := out[url]; dup {
			return nil, fmt.Errorf("%s shown twice under FINAL", url)
		}
		out[url] = a
	}
	return out, rows.Err()
}

// failuresOf counts failures rows per URL under FINAL (a redelivery
// collapses; a failure recorded twice under two webhook ids would show).
func (p *pipeline) failuresOf(t *testing.T, crawlID string) map[string]int {
	t.Helper()
	rows, err := p.conn.Query(context.Background(), "SELECT url, count() FROM "+p.db+".failures FINAL WHERE crawl_id = ? GROUP BY url", uuid.MustParse(crawlID))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var url string
		var n uint64
		if err := rows.Scan(&url, &n); err != nil {
			t.Fatal(err)
		}
		out[url] = int(n)
	}
	return out
}

// TestRealDeliveriesArchived replays every delivery of both captured runs
// and checks the archive: one pages row per page under FINAL with the
// Document exactly as sent, the failed scrape and the page whose target
// answered 404 in failures once, webhook metadata kept, non-ASCII text
// intact.
func TestRealDeliveriesArchived(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, "")
	url := p.startReceiver(t, env{"WEBHOOK_SECRETS": realSecret})
	p.startSink(t, nil)

	for _, run := range []string{"run1", "run2"} {
		t.Run(run, func(t *testing.T) {
			deliveries := readRun(t, run)
			crawlID := deliveries[0].event.ID
			type want struct {
				doc                json.RawMessage
				status             int
				markdown, metadata string
				failed             bool
			}
			wantPages := map[string]want{}
			wantFailures := map[string]bool{}
			for _, d := range deliveries {
				code, answer := replay(t, url, d)
				if code != 200 || !strings.Contains(answer, `"status":"accepted"`) {
					t.Fatalf("%s: %d %s", d.name, code, answer)
				}
				if d.event.Type != "crawl.page" {
					continue
				}
				if len(d.event.Data) != 1 {
					t.Fatalf("%s: %d documents", d.name, len(d.event.Data))
				}
				u, status, md := pageURL(t, d.event.Data[0])
				failed := !d.event.Success || status >= 400
				wantPages[u] = want{doc: d.event.Data[0], status: status, markdown: md, metadata: string(d.event.Metadata), failed: failed}
				if failed {
					wantFailures[u] = true
				}
			}
			if len(wantFailures) == 0 {
				t.Fatalf("%s has no failed page: the fixture is not what this test expects", run)
			}

			var got map[string]archivedPage
			waitFor(t, time.Minute, "every page archived", func() bool {
				got, _ = p.tryPagesOf(crawlID)
				return len(got) >= len(wantPages)
			})
			got = p.pagesOf(t, crawlID)
			if len(got) != len(wantPages) {
				t.Fatalf("%d pages archived, %d delivered", len(got), len(wantPages))
			}
			for u, w := range wantPages {
				a, ok := got[u]
				switch {
				case !ok:
					t.Fatalf("%s not archived", u)
				case a.document != string(w.doc):
					t.Fatalf("%s: document is not data[0] as sent\n got %s\nwant %s", u, a.document, w.doc)
				case a.markdown != w.markdown:
					t.Fatalf("%s: markdown differs", u)
				case a.origin != "webhook" || a.success == w.failed || int(a.status) != w.status:
					t.Fatalf("%s: origin %s success %v status %d, want webhook %v %d", u, a.origin, a.success, a.status, !w.failed, w.status)
				case a.metadata != w.metadata:
					t.Fatalf("%s: webhook metadata %q, want %q", u, a.metadata, w.metadata)
				}
			}
			// Failures are inserted after the pages of their batch.
			waitFor(t, time.Minute, "the failures archived", func() bool {
				return len(p.failuresOf(t, crawlID)) >= len(wantFailures)
			})
			failures := p.failuresOf(t, crawlID)
			for u := range wantFailures {
				if failures[u] != 1 {
					t.Errorf("failed page %s: %d failures rows, want 1", u, failures[u])
				}
			}
			if len(failures) != len(wantFailures) {
				t.Errorf("failures rows for %d URLs, want %d: %v", len(failures), len(wantFailures), failures)
			}
			t.Logf("%s: %d deliveries, %d pages, %d failed", run, len(deliveries), len(got), len(failures))
		})
	}

	// The captured site is ASCII; the sender sends other text as raw UTF-8
	// and signs those bytes. A captured page with its text made non-ASCII,
	// under a crawl id of its own, signed as the sender signs.
	t.Run("non-ASCII", func(t *testing.T) {
		var d realDelivery
		for _, c := range readRun(t, "run1") {
			if c.event.Type == "crawl.page" && c.event.Success {
				d = c
				break
			}
		}
		crawlID, text := uuid.NewString(), "Grüße aus Köln — 日本語のページ — Ελληνικά — 🕷️ "
		body := bytes.Replace(d.body, []byte(d.event.ID), []byte(crawlID), 1)
		body = bytes.Replace(body, []byte(d.event.WebhookID), []byte(uuid.NewString()), 1)
		body = bytes.Replace(body, []byte(`"markdown":"`), []byte(`"markdown":"`+text), 1)
		mac := hmac.New(sha256.New, []byte(realSecret))
		mac.Write(body)
		d.body = body
		d.headers.Set("X-Firecrawl-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		if code, answer := replay(t, url, d); code != 200 {
			t.Fatalf("%d %s", code, answer)
		}
		var doc struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		u, _, md := pageURL(t, doc.Data[0])
		var got map[string]archivedPage
		waitFor(t, time.Minute, "the page archived", func() bool {
			got, _ = p.tryPagesOf(crawlID)
			return len(got) == 1
		})
		a := got[u]
		if a.document != string(doc.Data[0]) || a.markdown != md || !strings.HasPrefix(a.markdown, text) {
			t.Fatalf("non-ASCII text changed on its way:\n got %q\nwant %q", a.markdown[:min(len(a.markdown), 80)], md[:80])
		}
	})
}

// TestRealBackfillConverges drops some of run2's page deliveries, lets
// backfill read the captured GET /v2/crawl/{id} answer, and checks that the
// archive ends as the no-drop archive does: the same pages and failures,
// delivered pages still of origin webhook with their webhook ids, the
// dropped ones recovered with origin backfill. (The status answer holds the
// same Documents with their keys in another order: documents are compared
// as JSON values.)
func TestRealBackfillConverges(t *testing.T) {
	t.Parallel()
	status := readFile(t, filepath.Join(realFixtures, "run2-crawl-status.json"))
	deliveries := readRun(t, "run2")
	crawlID := deliveries[0].event.ID
	const key = "fc-test-key"
	var statusReads, errorsReads atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"success":false,"error":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v2/crawl/" + crawlID:
			statusReads.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(status)
		default:
			// The capture has no errors answer: an API without the
			// endpoint, which backfill must take in its stride.
			errorsReads.Add(1)
			http.Error(w, "Cannot GET "+r.URL.Path, http.StatusNotFound)
		}
	}))
	t.Cleanup(api.Close)

	// The reference: every delivery.
	ref := newPipeline(t, "")
	refURL := ref.startReceiver(t, env{"WEBHOOK_SECRETS": realSecret})
	ref.startSink(t, nil)
	// The run under test: every third successful page delivery lost.
	p := newPipeline(t, "")
	url := p.startReceiver(t, env{"WEBHOOK_SECRETS": realSecret})
	p.startSink(t, env{"CRAWL_API_URL": api.URL, "CRAWL_API_KEY": key, "BACKFILL_QUIET_PERIOD": "1h"})

	dropped := map[string]bool{}
	pages, failed := 0, 0
	for _, d := range deliveries {
		if d.event.Type == "crawl.page" {
			if _, status, _ := pageURL(t, d.event.Data[0]); !d.event.Success || status >= 400 {
				failed++
			}
		}
		if code, answer := replay(t, refURL, d); code != 200 {
			t.Fatalf("reference %s: %d %s", d.name, code, answer)
		}
		if d.event.Type == "crawl.page" && d.event.Success {
			pages++
			if pages%3 == 0 {
				u, _, _ := pageURL(t, d.event.Data[0])
				dropped[u] = true
				continue
			}
		}
		// crawl.completed (last) triggers the backfill.
		if code, answer := replay(t, url, d); code != 200 {
			t.Fatalf("%s: %d %s", d.name, code, answer)
		}
	}

	var want, got map[string]archivedPage
	waitFor(t, time.Minute, "the reference archive", func() bool {
		want, _ = ref.tryPagesOf(crawlID)
		return len(want) >= pages+1 // and the failed scrape
	})
	waitFor(t, 2*time.Minute, "backfill to recover the dropped pages", func() bool {
		got, _ = p.tryPagesOf(crawlID)
		return len(got) >= len(want)
	})
	want, got = ref.pagesOf(t, crawlID), p.pagesOf(t, crawlID)
	if len(got) != len(want) {
		t.Fatalf("%d pages after backfill, %d without drops", len(got), len(want))
	}
	for u, w := range want {
		a := got[u]
		var wd, ad any
		if json.Unmarshal([]byte(w.document), &wd) != nil || json.Unmarshal([]byte(a.document), &ad) != nil || fmt.Sprint(wd) != fmt.Sprint(ad) {
			t.Fatalf("%s: document differs from the delivered one\n got %s\nwant %s", u, a.document, w.document)
		}
		if a.markdown != w.markdown || a.success != w.success || a.status != w.status {
			t.Fatalf("%s: %+v, want %+v", u, a, w)
		}
		switch {
		case dropped[u] && (a.origin != "backfill" || a.webhookID != uuid.Nil.String()):
			t.Fatalf("dropped %s: origin %s webhook %s, want backfill", u, a.origin, a.webhookID)
		case !dropped[u] && (a.origin != "webhook" || a.webhookID != w.webhookID):
			t.Fatalf("delivered %s flipped: origin %s webhook %s, want webhook %s", u, a.origin, a.webhookID, w.webhookID)
		}
	}
	waitFor(t, time.Minute, "the failures archived", func() bool {
		return len(ref.failuresOf(t, crawlID)) >= failed && len(p.failuresOf(t, crawlID)) >= failed
	})
	wantF, gotF := ref.failuresOf(t, crawlID), p.failuresOf(t, crawlID)
	if fmt.Sprint(wantF) != fmt.Sprint(gotF) {
		t.Fatalf("failures %v, without drops %v", gotF, wantF)
	}
	// The errors endpoint is read after the status pages: the failures may
	// all be archived (from their deliveries) a moment before it is.
	waitFor(t, time.Minute, "backfill to read the status and errors endpoints", func() bool {
		return statusReads.Load() > 0 && errorsReads.Load() > 0
	})
	t.Logf("%d pages, %d dropped and recovered, failures %v", len(got), len(dropped), gotF)
}
