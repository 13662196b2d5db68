package crawlsim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
)

type statusPage struct {
	Success     bool              `json:"success"`
	Status      string            `json:"status"`
	Total       int               `json:"total"`
	Completed   int               `json:"completed"`
	CreditsUsed int               `json:"creditsUsed"`
	ExpiresAt   time.Time         `json:"expiresAt"`
	Next        *string           `json:"next"`
	Data        []json.RawMessage `json:"data"`
	Error       string            `json:"error"`
}

func startAPI(t *testing.T, o APIOptions, crawls ...*Crawl) (*API, *httptest.Server) {
	t.Helper()
	if o.Key == "" {
		o.Key = "test-key"
	}
	a := NewAPI(o)
	for _, c := range crawls {
		a.Add(c)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return a, srv
}

func get(t *testing.T, rawURL, key string) (int, http.Header, statusPage, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p statusPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v: %s", rawURL, err, b)
	}
	return resp.StatusCode, resp.Header, p, string(b)
}

func newCrawl(t *testing.T, o Options) *Crawl {
	t.Helper()
	c, err := NewCrawl(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Following next from the first page reads every successful page once, in
// pages of at most PageDocs entries, and next is absent on the last page of
// a completed crawl.
func TestAPIPagesWithSkipUntilNextIsAbsent(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 95, Seed: 1, Faults: Faults{Failures: 0.2}})
	c.Finish(crawlapi.StatusCompleted)
	_, srv := startAPI(t, APIOptions{PageDocs: 10}, c)

	seen := map[string]bool{}
	next := srv.URL + "/v2/crawl/" + c.ID
	var pages int
	for next != "" && pages < 100 {
		code, _, p, raw := get(t, next, "test-key")
		if code != 200 || !p.Success || p.Status != crawlapi.StatusCompleted || p.Total != 95 || p.Completed != 76 || p.CreditsUsed != 76 {
			t.Fatalf("page %d: %d %s", pages, code, raw)
		}
		if len(p.Data) > 10 {
			t.Fatalf("page has %d documents", len(p.Data))
		}
		for _, d := range p.Data {
			var doc struct {
				Markdown string         `json:"markdown"`
				Metadata map[string]any `json:"metadata"`
			}
			json.Unmarshal(d, &doc)
			u, _ := doc.Metadata["url"].(string)
			if seen[u] || doc.Metadata["scrapeId"] == nil || doc.Markdown == "" {
				t.Fatalf("document %s", d)
			}
			if _, ok := doc.Metadata["contentType"]; ok {
				t.Fatal("status documents carry no contentType")
			}
			seen[u] = true
		}
		pages++
		next = ""
		if p.Next != nil {
			next = *p.Next
		} else if strings.Contains(raw, `"next"`) {
			t.Fatal("next must be absent, not null, at the end")
		}
	}
	if pages != 10 || len(seen) != 76 {
		t.Fatalf("%d pages, %d documents; want 10 and 76", pages, len(seen))
	}
	for _, u := range c.SuccessfulURLs() {
		if !seen[u] {
			t.Fatalf("%s never read", u)
		}
	}
}

func TestAPICutsPagesAtByteLimit(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 10, PageBytes: 1000})
	c.Finish(crawlapi.StatusCompleted)
	_, srv := startAPI(t, APIOptions{PageBytes: 3000}, c)
	_, _, p, _ := get(t, srv.URL+"/v2/crawl/"+c.ID, "test-key")
	if len(p.Data) != 2 || p.Next == nil {
		t.Fatalf("want 2 documents and a next, got %d, %v", len(p.Data), p.Next)
	}
	u, _ := url.Parse(*p.Next)
	if u.Query().Get("skip") != "2" {
		t.Fatalf("next %s", *p.Next)
	}
}

// While a crawl runs, next is present even when data is empty, and it does
// not move past the pages scraped so far.
func TestAPIScrapingCrawlKeepsNext(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 10})
	c.Scrape(4)
	_, srv := startAPI(t, APIOptions{}, c)
	_, _, p, _ := get(t, srv.URL+"/v2/crawl/"+c.ID, "test-key")
	if p.Status != crawlapi.StatusScraping || len(p.Data) != 4 || p.Total != 4 || p.Next == nil {
		t.Fatalf("%+v", p)
	}
	_, _, p, raw := get(t, *p.Next, "test-key")
	if len(p.Data) != 0 || p.Next == nil || !strings.Contains(raw, `"data":[]`) {
		t.Fatalf("empty scraping page: %s", raw)
	}
	if !strings.HasSuffix(*p.Next, "skip=4") {
		t.Fatalf("next %s", *p.Next)
	}
	c.Finish(crawlapi.StatusCompleted)
	_, _, p, _ = get(t, *p.Next, "test-key")
	if len(p.Data) != 6 || p.Next != nil || p.Status != crawlapi.StatusCompleted {
		t.Fatalf("after completion: %+v", p)
	}
}

func TestAPIErrors(t *testing.T) {
	t.Parallel()
	expired := newCrawl(t, Options{Pages: 1})
	expired.Expire()
	ok := newCrawl(t, Options{Pages: 1})
	_, srv := startAPI(t, APIOptions{}, expired, ok)
	tests := []struct {
		name, path, key string
		code            int
		errText         string
	}{
		{"no key", "/v2/crawl/" + ok.ID, "", 401, "Unauthorized"},
		{"wrong key", "/v2/crawl/" + ok.ID, "other", 401, "Unauthorized"},
		{"unknown", "/v2/crawl/6f1c5d2e-0000-4000-8000-000000000000", "test-key", 404, "Job not found"},
		{"expired", "/v2/crawl/" + expired.ID, "test-key", 404, "Job not found"},
		{"bad skip", "/v2/crawl/" + ok.ID + "?skip=x", "test-key", 400, "Invalid skip"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, p, raw := get(t, srv.URL+tc.path, tc.key)
			if code != tc.code || p.Success || !strings.Contains(p.Error, tc.errText) {
				t.Fatalf("%d %s", code, raw)
			}
		})
	}
	if _, _, _, raw := get(t, srv.URL+"/v2/crawl/6f1c5d2e-0000-4000-8000-000000000000", "test-key"); raw != `{"success":false,"error":"Job not found"}` {
		t.Fatalf("404 body %s", raw)
	}
}

// Right after creation a crawl may answer 404, then 429s whose wait is only
// in the error text.
func TestAPIEarlyNotFoundThenThrottled(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 1})
	c.Finish(crawlapi.StatusCompleted)
	_, srv := startAPI(t, APIOptions{NotFoundReads: 1, ThrottleReads: 1, RetryAfter: 3 * time.Second}, c)
	u := srv.URL + "/v2/crawl/" + c.ID
	if code, _, _, _ := get(t, u, "test-key"); code != 404 {
		t.Fatalf("first read %d", code)
	}
	code, h, p, _ := get(t, u, "test-key")
	if code != 429 || h.Get("Retry-After") != "" || !strings.Contains(p.Error, "retry after 3s") {
		t.Fatalf("second read %d %v %q", code, h, p.Error)
	}
	if code, _, _, _ := get(t, u, "test-key"); code != 200 {
		t.Fatalf("third read %d", code)
	}
	if c.Reads() != 3 {
		t.Fatalf("reads %d", c.Reads())
	}
}

func TestAPIExpiresAtMovesOnEachRead(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newCrawl(t, Options{Pages: 1})
	c.Finish(crawlapi.StatusCompleted)
	_, srv := startAPI(t, APIOptions{Now: func() time.Time { return now }}, c)
	u := srv.URL + "/v2/crawl/" + c.ID
	_, _, p, _ := get(t, u, "test-key")
	if !p.ExpiresAt.Equal(now.Add(24 * time.Hour)) {
		t.Fatalf("expiresAt %v", p.ExpiresAt)
	}
	now = now.Add(23 * time.Hour)
	_, _, p, _ = get(t, u, "test-key")
	if !p.ExpiresAt.Equal(now.Add(24 * time.Hour)) {
		t.Fatalf("expiresAt did not move: %v", p.ExpiresAt)
	}
	now = now.Add(25 * time.Hour)
	if code, _, _, _ := get(t, u, "test-key"); code != 404 {
		t.Fatalf("read after expiry: %d", code)
	}
}

func TestAPINextBase(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 3})
	c.Finish(crawlapi.StatusCompleted)
	_, srv := startAPI(t, APIOptions{PageDocs: 1, NextBase: "https://elsewhere.invalid:1"}, c)
	_, _, p, _ := get(t, srv.URL+"/v2/crawl/"+c.ID+"?limit=1", "test-key")
	if p.Next == nil || *p.Next != "https://elsewhere.invalid:1/v2/crawl/"+c.ID+"?skip=1&limit=1" {
		t.Fatalf("next %v", p.Next)
	}
}
