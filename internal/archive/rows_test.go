package archive_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/google/uuid"
)

// TestEventRows maps the sender's fixtures to rows, field by field.
func TestEventRows(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC)
	crawl := uuid.MustParse("5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c")

	t.Run("page", func(t *testing.T) {
		t.Parallel()
		ev, body := decodeFixture(t, "crawl-page.json")
		r, err := archive.EventRows(ev, body, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Pages) != 1 || len(r.Failures) != 0 || len(r.CrawlEvents) != 0 {
			t.Fatalf("rows %d/%d/%d, want one page", len(r.Pages), len(r.Failures), len(r.CrawlEvents))
		}
		p := r.Pages[0]
		want := archive.Page{
			CrawlID: crawl, URL: "https://example.com/", ScrapeID: "7c9e6679-7425-40de-944b-e07fc1f90ae7",
			WebhookID: uuid.MustParse("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"), Origin: "webhook",
			Success: true, StatusCode: 200, Title: "Example Domain",
			Markdown:   "# Example Domain\n\nThis domain is for use in illustrative examples.",
			ReceivedAt: at,
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
		ev, body := decodeFixture(t, "crawl-page-failed.json")
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
			CrawlID: crawl, WebhookID: uuid.MustParse("3b2f1c9e-8d7a-4c6b-9e5f-0a1b2c3d4e5f"),
			URL: "https://example.com/broken", Error: "Request failed with status code 502", ReceivedAt: at,
		}
		if r.Failures[0] != want {
			t.Errorf("failure\n got %+v\nwant %+v", r.Failures[0], want)
		}
	})

	t.Run("crawl.completed", func(t *testing.T) {
		t.Parallel()
		ev, body := decodeFixture(t, "crawl-completed.json")
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
		{"metadata.error", `{"metadata":{"url":"https://a/","error":"timeout"}}`, true, "timeout", "https://a/", 0},
		{"status 404", `{"metadata":{"sourceURL":"https://b/","statusCode":404}}`, true, "HTTP 404", "https://b/", 404},
		{"status out of range", `{"metadata":{"sourceURL":"https://c/","statusCode":70000}}`, true, "HTTP 70000", "https://c/", 0},
		{"ok", `{"metadata":{"sourceURL":"https://d/","statusCode":204}}`, true, "", "https://d/", 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := `{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","data":[` + tc.doc + `]}`
			ev := mustDecode(t, body)
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
