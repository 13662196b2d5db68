package archive_test

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// TestEventRows maps the sender's fixtures to rows, field by field.
func TestEventRows(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC)
	crawl := uuid.MustParse("5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c")

	t.Run("page", func(t *testing.T) {
		t.Parallel()
		ev, body := archivetest.DecodeFixture(t, "crawl-page.json")
		r, err := archive.EventRows(ev, body, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Pages) != 1 || len(r.Failures) != 0 || len(r.CrawlEvents) != 0 {
			t.Fatalf("rows %d/%d/%d, want one page", len(r.Pages), len(r.Failures), len(r.CrawlEvents))
		}
		p := r.Pages[0]
		want := archive.Page{
			CrawlID: crawl, JobKind: "crawl", URL: "https://example.com/", ScrapeID: "7c9e6679-7425-40de-944b-e07fc1f90ae7",
			WebhookID: uuid.MustParse("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"), Origin: "webhook",
			Success: true, StatusCode: 200, Title: "Example Domain",
			Markdown:        "# Example Domain\n\nThis domain is for use in illustrative examples.",
			WebhookMetadata: []byte(`{"tenant":"acme"}`),
			ReceivedAt:      at,
		}
		doc := p.Document
		p.Document = nil
		if !reflect.DeepEqual(p, want) {
			t.Errorf("page\n got %+v\nwant %+v", p, want)
		}
		// The Document exactly as received: the bytes of data[0].
		wantDoc := `{"markdown":"# Example Domain\n\nThis domain is for use in illustrative examples.","metadata":{"title":"Example Domain","language":"en","sourceURL":"https://example.com/","url":"https://example.com/","statusCode":200,"contentType":"text/html; charset=UTF-8","scrapeId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","proxyUsed":"basic","cacheState":"miss","creditsUsed":1}}`
		if string(doc) != wantDoc {
			t.Errorf("document\n got %s\nwant %s", doc, wantDoc)
		}
	})

	t.Run("failed page", func(t *testing.T) {
		t.Parallel()
		ev, body := archivetest.DecodeFixture(t, "crawl-page-failed.json")
		r, err := archive.EventRows(ev, body, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Pages) != 1 || len(r.Failures) != 1 {
			t.Fatalf("rows %d pages %d failures, want 1 and 1", len(r.Pages), len(r.Failures))
		}
		p := r.Pages[0]
		if p.URL != "https://example.com/broken" || p.Success || p.Error != "Request failed with status code 502" || p.Origin != "webhook" {
			t.Errorf("page %+v", p)
		}
		want := archive.Failure{
			CrawlID: crawl, JobKind: "crawl", WebhookID: uuid.MustParse("3b2f1c9e-8d7a-4c6b-9e5f-0a1b2c3d4e5f"),
			URL: "https://example.com/broken", Error: "Request failed with status code 502", Reason: "failed",
			WebhookMetadata: []byte(`{"tenant":"acme"}`), ReceivedAt: at,
		}
		if !reflect.DeepEqual(r.Failures[0], want) {
			t.Errorf("failure\n got %+v\nwant %+v", r.Failures[0], want)
		}
	})

	t.Run("crawl.completed", func(t *testing.T) {
		t.Parallel()
		ev, body := archivetest.DecodeFixture(t, "crawl-completed.json")
		r, err := archive.EventRows(ev, body, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Pages) != 0 || len(r.CrawlEvents) != 1 {
			t.Fatalf("rows %+v", r)
		}
		e := r.CrawlEvents[0]
		if e.CrawlID != crawl || e.Type != "crawl.completed" || !e.Success || string(e.Event) != string(body) || !e.ReceivedAt.Equal(at) {
			t.Errorf("crawl event %+v", e)
		}
	})
}

func TestEventRowsFailureRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc string
		success   bool
		wantErr   string
		wantURL   string
		wantCode  uint16
	}{
		// A page's metadata.error is what the page says of itself (the API
		// copies its <meta> tags): it fails nothing.
		{"metadata.error", `{"metadata":{"url":"https://a/","error":"timeout"}}`, true, "", "https://a/", 0},
		{"metadata.error, status 200", `{"metadata":{"url":"https://a/","statusCode":200,"error":"timeout"}}`, true, "", "https://a/", 200},
		{"metadata.error, status 503", `{"metadata":{"url":"https://a/","statusCode":503,"error":"timeout"}}`, true, "HTTP 503: timeout", "https://a/", 503},
		{"status 404", `{"metadata":{"sourceURL":"https://b/","statusCode":404}}`, true, "HTTP 404", "https://b/", 404},
		{"ok", `{"metadata":{"sourceURL":"https://d/","statusCode":204}}`, true, "", "https://d/", 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := `{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","data":[` + tc.doc + `]}`
			ev := archivetest.MustDecode(t, body)
			r, err := archive.EventRows(ev, []byte(body), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			p := r.Pages[0]
			if p.Error != tc.wantErr || p.URL != tc.wantURL || p.StatusCode != tc.wantCode || p.Success != (tc.wantErr == "") {
				t.Errorf("page %+v", p)
			}
			if (len(r.Failures) == 1) != (tc.wantErr != "") {
				t.Errorf("failures %+v", r.Failures)
			}
		})
	}
}

// TestStatusCodeClamp: whatever statusCode holds, the status_code column
// and the failure decision agree: a number in 0..65535 is kept (its
// fraction dropped, a numeric string read), anything else is 0, "unknown",
// and fails no page; the value as sent stays in the document.
func TestStatusCodeClamp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value    string
		wantCode uint16
	}{
		{`200`, 200},
		{`404`, 404},
		{`404.7`, 404},
		{`399.99`, 399},
		{`"404"`, 404},
		{`"404.7"`, 404},
		{`"4e2"`, 400},
		{`65535`, 65535},
		{`65535.5`, 65535},
		{`65536`, 0},
		{`70000`, 0},
		{`"70000"`, 0},
		{`-1`, 0},
		{`-404`, 0},
		{`"-404"`, 0},
		{`-0`, 0},
		{`0.5`, 0},
		{`1e30`, 0},
		{`-1e30`, 0},
		{`1e999`, 0},
		{`9223372036854775808`, 0},
		{`"NaN"`, 0},
		{`"Inf"`, 0},
		{`"-Infinity"`, 0},
		{`" 404"`, 0},
		{`"abc"`, 0},
		{`""`, 0},
		{`true`, 0},
		{`null`, 0},
		{`[404]`, 0},
		{`{"code":404}`, 0},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Parallel()
			doc := `{"metadata":{"sourceURL":"https://s/","statusCode":` + tc.value + `}}`
			body := `{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","data":[` + doc + `]}`
			ev := archivetest.MustDecode(t, body)
			r, err := archive.EventRows(ev, []byte(body), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Pages) != 1 {
				t.Fatalf("%d page rows", len(r.Pages))
			}
			p := r.Pages[0]
			wantFailed := tc.wantCode >= 400
			wantErr := ""
			if wantFailed {
				wantErr = "HTTP " + strconv.Itoa(int(tc.wantCode))
			}
			if p.StatusCode != tc.wantCode || p.Success == wantFailed || p.Error != wantErr {
				t.Errorf("status_code %d success %v error %q; want %d %v %q", p.StatusCode, p.Success, p.Error, tc.wantCode, !wantFailed, wantErr)
			}
			if wantFailed != (len(r.Failures) == 1) || wantFailed && (r.Failures[0].StatusCode != tc.wantCode || r.Failures[0].Error != wantErr) {
				t.Errorf("failures %+v", r.Failures)
			}
			if string(p.Document) != doc {
				t.Errorf("document %s, want %s", p.Document, doc)
			}
		})
	}
}

// TestEventRowsWithoutPageURL: a page event that leaves no page to key by
// URL still leaves a failure row, and never a pages row under the empty URL
// (which would collapse distinct failures into one).
func TestEventRowsWithoutPageURL(t *testing.T) {
	t.Parallel()
	const ids = `"id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"`
	crawl := uuid.MustParse("5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c")
	webhook := uuid.MustParse("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, body string
		want       []archive.Failure
	}{
		{"failed page, data empty", `{"success":false,"type":"crawl.page",` + ids + `,"data":[],"error":"All scraping engines failed"}`,
			[]archive.Failure{{CrawlID: crawl, JobKind: "crawl", Reason: "failed", WebhookID: webhook, Error: "All scraping engines failed", ReceivedAt: at}}},
		{"failed page, data empty, no error", `{"success":false,"type":"crawl.page",` + ids + `,"data":[]}`,
			[]archive.Failure{{CrawlID: crawl, JobKind: "crawl", Reason: "failed", WebhookID: webhook, Error: "scrape failed", ReceivedAt: at}}},
		{"successful page, data empty", `{"success":true,"type":"crawl.page",` + ids + `,"data":[]}`,
			[]archive.Failure{{CrawlID: crawl, JobKind: "crawl", Reason: "failed", WebhookID: webhook, Error: "page event without a document", ReceivedAt: at}}},
		{"failed page, no URL", `{"success":false,"type":"crawl.page",` + ids + `,"data":[{"metadata":{"statusCode":502}}],"error":"boom"}`,
			[]archive.Failure{{CrawlID: crawl, JobKind: "crawl", Reason: "failed", WebhookID: webhook, StatusCode: 502, Error: "boom", ReceivedAt: at}}},
		{"failed page, metadata not an object", `{"success":false,"type":"crawl.page",` + ids + `,"data":[{"metadata":"https://x/"}],"error":"boom"}`,
			[]archive.Failure{{CrawlID: crawl, JobKind: "crawl", Reason: "failed", WebhookID: webhook, Error: "boom", ReceivedAt: at}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := archivetest.MustDecode(t, tc.body) // the receiver accepts it
			r, err := archive.EventRows(ev, []byte(tc.body), at)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Pages) != 0 || len(r.CrawlEvents) != 0 || !reflect.DeepEqual(r.Failures, tc.want) {
				t.Errorf("rows: pages %+v, events %+v, failures\n got %+v\nwant %+v", r.Pages, r.CrawlEvents, r.Failures, tc.want)
			}
		})
	}

	// A successful page without a URL is refused by the receiver; one
	// stored before that check (decoded without validation, as the sink
	// does) is still archived, as a failure.
	body := []byte(`{"success":true,"type":"crawl.page",` + ids + `,"data":[{"markdown":"# x","metadata":{"title":"x"}}]}`)
	if _, err := events.Validate(body); err == nil {
		t.Fatal("Validate accepted a successful page without a URL")
	}
	ev, err := events.DecodeAccepted(body)
	if err != nil {
		t.Fatal(err)
	}
	r, err := archive.EventRows(ev, body, at)
	if err != nil {
		t.Fatal(err)
	}
	want := []archive.Failure{{CrawlID: crawl, JobKind: "crawl", Reason: "failed", WebhookID: webhook, Error: archive.NoPageURLReason, ReceivedAt: at}}
	if len(r.Pages) != 0 || !reflect.DeepEqual(r.Failures, want) {
		t.Errorf("rows: pages %+v, failures %+v", r.Pages, r.Failures)
	}
}
