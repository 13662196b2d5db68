package crawlsim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// errorsBody is the errors endpoint's answer as a client reads it.
type errorsBody struct {
	Errors []struct {
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		URL       string `json:"url"`
		Code      string `json:"code"`
		Error     string `json:"error"`
	} `json:"errors"`
	RobotsBlocked []string `json:"robotsBlocked"`
}

// getRaw GETs rawURL with the bearer key and returns status, content type
// and body.
func getRaw(t *testing.T, rawURL, key string) (int, string, []byte) {
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
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func getErrors(t *testing.T, rawURL string) errorsBody {
	t.Helper()
	code, _, b := getRaw(t, rawURL, "test-key")
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", rawURL, code, b)
	}
	var e errorsBody
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("%s: %v: %s", rawURL, err, b)
	}
	if strings.Contains(string(b), `"success"`) {
		t.Fatalf("the errors answer has no success field: %s", b)
	}
	return e
}

// A batch scrape is delivered as batch_scrape.started, one
// batch_scrape.page per URL (a failure exactly as a failed crawl.page:
// success false, a top-level error, data [{metadata:{sourceURL}}]) and
// batch_scrape.completed; its status is served at /v2/batch/scrape/{id}
// only, with next links on that path.
func TestBatchScrapeDeliveriesAndStatus(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Kind: events.KindBatchScrape, Pages: 12, Seed: 3, Faults: Faults{Failures: 0.25}})
	rcv, srv := newReceiver(t, "k", verify.DefaultHeader)
	s, err := NewSender(SenderOptions{Target: srv.URL, Secret: "k", RetryDelays: []time.Duration{}})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Send(context.Background(), c)
	if r.Kind != events.KindBatchScrape || r.Status != crawlapi.StatusCompleted || r.Summary.Pages != 12 || r.Summary.Failed != 3 || r.Summary.Accepted != 12 {
		t.Fatalf("report %+v %+v", r, r.Summary)
	}
	if r.Deliveries[0].Type != "batch_scrape.started" || r.Deliveries[len(r.Deliveries)-1].Type != "batch_scrape.completed" {
		t.Fatalf("first %s, last %s", r.Deliveries[0].Type, r.Deliveries[len(r.Deliveries)-1].Type)
	}
	types := map[string]int{}
	for _, typ := range rcv.order {
		types[typ]++
	}
	if types["batch_scrape.started"] != 1 || types["batch_scrape.page"] != 12 || types["batch_scrape.completed"] != 1 || len(types) != 3 {
		t.Fatalf("types received %v", types)
	}
	for _, p := range c.Pages {
		if p.Success {
			continue
		}
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(rcv.posts[p.WebhookID][0], &ev); err != nil {
			t.Fatal(err)
		}
		if string(ev["success"]) != "false" || string(ev["type"]) != `"batch_scrape.page"` ||
			string(ev["error"]) != `"`+FailedError+`"` || string(ev["data"]) != `[{"metadata":{"sourceURL":"`+p.URL+`"}}]` {
			t.Fatalf("failed page delivery %s", rcv.posts[p.WebhookID][0])
		}
	}

	a, api := startAPI(t, APIOptions{PageDocs: 4}, c)
	if code, _, _, raw := get(t, api.URL+"/v2/crawl/"+c.ID, "test-key"); code != http.StatusNotFound || !strings.Contains(raw, "Job not found") {
		t.Fatalf("a batch scrape under /v2/crawl/: %d %s", code, raw)
	}
	next, read := api.URL+"/v2/batch/scrape/"+c.ID, 0
	for i := 0; next != "" && i < 10; i++ {
		code, _, p, raw := get(t, next, "test-key")
		if code != http.StatusOK || p.Status != crawlapi.StatusCompleted || p.Total != 12 || p.Completed != 9 {
			t.Fatalf("%s: %d %s", next, code, raw)
		}
		read += len(p.Data)
		next = ""
		if p.Next != nil {
			next = *p.Next
			if !strings.Contains(next, "/v2/batch/scrape/"+c.ID+"?skip=") {
				t.Fatalf("next %s is not on the batch scrape's path", next)
			}
		}
	}
	if read != 9 || next != "" {
		t.Fatalf("read %d documents, next %q", read, next)
	}
	if a.Requests() == 0 {
		t.Fatal("no request counted")
	}
}

// The errors endpoint lists every failed scrape of the job so far, whether
// or not its delivery was sent, with the scrape's id, time, URL, code and
// error, and the robots-blocked URLs (never among the pages or the errors).
// It checks the key like the status endpoint; an API without it answers an
// HTML 404 for the route.
func TestErrorsEndpoint(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := newCrawl(t, Options{Pages: 20, Seed: 5, RobotsBlocked: 3, Now: func() time.Time { return at },
		Faults: Faults{Failures: 0.1, DroppedFailures: 0.15, Drops: 0.1}})
	batch := newCrawl(t, Options{Kind: events.KindBatchScrape, Pages: 4, Seed: 6, Faults: Faults{DroppedFailures: 0.5}})
	_, api := startAPI(t, APIOptions{}, c, batch)

	// While nothing is scraped there is nothing to list but the blocked URLs.
	e := getErrors(t, api.URL+"/v2/crawl/"+c.ID+"/errors")
	if len(e.Errors) != 0 || len(e.RobotsBlocked) != 3 {
		t.Fatalf("before scraping: %+v", e)
	}
	c.Finish(crawlapi.StatusCompleted)
	e = getErrors(t, api.URL+"/v2/crawl/"+c.ID+"/errors")
	var urls []string
	dropped := 0
	for _, p := range c.Pages {
		if p.Success {
			continue
		}
		if p.Has(FaultDrop) {
			dropped++
		}
	}
	for _, x := range e.Errors {
		urls = append(urls, x.URL)
		if x.ID == "" || x.Timestamp != "2026-03-01T12:00:00.000Z" || x.Code != FailedCode || x.Error != FailedError {
			t.Fatalf("entry %+v", x)
		}
	}
	if !slices.Equal(urls, c.FailedURLs()) || len(urls) != 5 || dropped != 3 {
		t.Fatalf("errors list %v, want the 5 failed URLs %v (3 of them never delivered, got %d)", urls, c.FailedURLs(), dropped)
	}
	if !slices.Equal(e.RobotsBlocked, c.RobotsBlocked) {
		t.Fatalf("robotsBlocked %v, want %v", e.RobotsBlocked, c.RobotsBlocked)
	}
	for _, u := range c.RobotsBlocked {
		if slices.Contains(urls, u) || slices.Contains(c.SuccessfulURLs(), u) {
			t.Fatalf("blocked URL %s is a page", u)
		}
	}
	// The status of a finished job with blocked URLs carries the API's
	// warning.
	if _, _, _, raw := get(t, api.URL+"/v2/crawl/"+c.ID, "test-key"); !strings.Contains(raw, `"warning":"`+robotsWarning+`"`) {
		t.Fatalf("status without the robots warning: %.300s", raw)
	}

	batch.Finish(crawlapi.StatusCompleted)
	if e := getErrors(t, api.URL+"/v2/batch/scrape/"+batch.ID+"/errors"); len(e.Errors) != 2 || e.RobotsBlocked == nil {
		t.Fatalf("batch errors %+v", e)
	}

	for name, tc := range map[string]struct {
		url, key string
		code     int
		body     string
	}{
		"no key":            {"/v2/crawl/" + c.ID + "/errors", "", http.StatusUnauthorized, "Unauthorized"},
		"wrong key":         {"/v2/crawl/" + c.ID + "/errors", "nope", http.StatusUnauthorized, "Unauthorized"},
		"unknown job":       {"/v2/crawl/0190a4c6-7f3e-7a4c-9b2d-5e8f1a2b3c4d/errors", "test-key", http.StatusNotFound, "Job not found"},
		"batch under crawl": {"/v2/crawl/" + batch.ID + "/errors", "test-key", http.StatusNotFound, "Job not found"},
	} {
		if code, _, b := getRaw(t, api.URL+tc.url, tc.key); code != tc.code || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s: %d %s", name, code, b)
		}
	}

	_, bare := startAPI(t, APIOptions{NoErrorsEndpoint: true}, c)
	code, ctype, b := getRaw(t, bare.URL+"/v2/crawl/"+c.ID+"/errors", "test-key")
	if code != http.StatusNotFound || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(string(b), "Cannot GET /v2/crawl/"+c.ID+"/errors") {
		t.Fatalf("without the endpoint: %d %s %s", code, ctype, b)
	}
	if code, _, _, raw := get(t, bare.URL+"/v2/crawl/"+c.ID, "test-key"); code != http.StatusOK {
		t.Fatalf("the status endpoint of an API without errors: %d %s", code, raw)
	}
}

// A job cancelled after K pages delivers its K pages, then each remaining
// URL as a failure with the real API's cancellation text, then
// <kind>.cancelled; its status is cancelled (next still present, as the
// real API has it) and the errors endpoint lists the cancelled scrapes
// without a code.
func TestCancelledJob(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{events.KindCrawl, events.KindBatchScrape} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c := newCrawl(t, Options{Kind: kind, Pages: 10, Seed: 8, Cancel: true, CancelAfter: 4})
			rcv, srv := newReceiver(t, "", verify.DefaultHeader)
			s, _ := NewSender(SenderOptions{Target: srv.URL, Concurrency: 1, RetryDelays: []time.Duration{}})
			r := s.Send(context.Background(), c)
			if r.Status != crawlapi.StatusCancelled || r.Summary.Pages != 10 || r.Summary.Failed != 6 || r.Summary.CancelledPages != 6 {
				t.Fatalf("report %s %+v", r.Status, r.Summary)
			}
			if last := rcv.order[len(rcv.order)-1]; last != kind+".cancelled" {
				t.Fatalf("last event %s, order %v", last, rcv.order)
			}
			if slices.Contains(rcv.order, kind+".completed") {
				t.Fatal("a cancelled job sent completed")
			}
			for _, p := range c.Pages {
				var ev struct {
					Success bool   `json:"success"`
					Type    string `json:"type"`
					Error   string `json:"error"`
				}
				json.Unmarshal(rcv.posts[p.WebhookID][0], &ev)
				cancelled := p.Index >= 4
				if ev.Type != kind+".page" || ev.Success == cancelled || (ev.Error == CancelledError) != cancelled || p.Has(FaultCancelled) != cancelled {
					t.Fatalf("page %d: %+v", p.Index, ev)
				}
			}

			_, api := startAPI(t, APIOptions{}, c)
			code, _, p, raw := get(t, api.URL+c.StatusPath(), "test-key")
			if code != http.StatusOK || p.Status != crawlapi.StatusCancelled || p.Completed != 4 || len(p.Data) != 4 || p.Next == nil {
				t.Fatalf("status %d %s", code, raw)
			}
			e := getErrors(t, api.URL+c.StatusPath()+"/errors")
			if len(e.Errors) != 6 {
				t.Fatalf("%d errors, want 6", len(e.Errors))
			}
			for _, x := range e.Errors {
				if x.Error != CancelledError || x.Code != "" {
					t.Fatalf("entry %+v", x)
				}
			}
		})
	}
}

// Options that cannot describe a job are refused, naming the field.
func TestJobOptionsChecked(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]Options{
		"kind":            {Kind: "extract", Pages: 1},
		"robots blocked":  {Pages: 1, RobotsBlocked: -1},
		"cancel after":    {Pages: 3, Cancel: true, CancelAfter: 4},
		"dropped failure": {Pages: 3, Faults: Faults{DroppedFailures: 1.5}},
		"exclusive sum":   {Pages: 3, Faults: Faults{Drops: 0.5, DroppedFailures: 0.6}},
	} {
		if _, err := NewCrawl(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The binary runs a cancelled batch scrape with robots-blocked URLs, and
// the manifest says which kind the job is.
func TestRunBatchScrapeManifest(t *testing.T) {
	t.Parallel()
	_, srv := newReceiver(t, "", verify.DefaultHeader)
	manifest := t.TempDir() + "/run.json"
	var out, errOut strings.Builder
	err := Run(context.Background(), []string{"-kind", "batch_scrape", "-pages", "6", "-cancel-after", "2", "-robots-blocked", "2",
		"-target", srv.URL, "-listen", "127.0.0.1:0", "-exit", "-manifest", manifest, "-retry-delays", ""},
		func(string) string { return "" }, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "/v2/batch/scrape/") || !strings.Contains(out.String(), "4 failed as cancelled, 2 robots-blocked URLs") {
		t.Fatalf("summary:\n%s", out.String())
	}
	r, err := ReadManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != events.KindBatchScrape || r.Status != crawlapi.StatusCancelled || len(r.RobotsBlocked) != 2 ||
		r.Deliveries[len(r.Deliveries)-1].Type != "batch_scrape.cancelled" {
		t.Fatalf("manifest %+v", r)
	}
	if err := Run(context.Background(), []string{"-kind", "extract", "-exit"}, func(string) string { return "" }, &out, &errOut); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}

// -batch-pages sends a batch scrape after the crawl, served by the same
// API, with a manifest of its own.
func TestRunCrawlAndBatchScrape(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t, "", verify.DefaultHeader)
	manifest := t.TempDir() + "/run.json"
	var out, errOut strings.Builder
	err := Run(context.Background(), []string{"-pages", "5", "-batch-pages", "3", "-seed", "7",
		"-target", srv.URL, "-listen", "127.0.0.1:0", "-exit", "-manifest", manifest, "-retry-delays", ""},
		func(string) string { return "" }, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	crawl, err := ReadManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := ReadManifest(strings.TrimSuffix(manifest, ".json") + "-batch_scrape.json")
	if err != nil {
		t.Fatal(err)
	}
	if crawl.Kind != events.KindCrawl || batch.Kind != events.KindBatchScrape || crawl.CrawlID == batch.CrawlID ||
		crawl.Summary.Pages != 5 || batch.Summary.Pages != 3 {
		t.Fatalf("crawl %+v\nbatch %+v", crawl.Summary, batch.Summary)
	}
	if !strings.Contains(out.String(), "/v2/crawl/"+crawl.CrawlID) || !strings.Contains(out.String(), "/v2/batch/scrape/"+batch.CrawlID) {
		t.Fatalf("output:\n%s", out.String())
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var batchPages int
	for _, typ := range rcv.order {
		if typ == "batch_scrape.page" {
			batchPages++
		}
	}
	if batchPages != 3 {
		t.Fatalf("%d batch_scrape.page deliveries, want 3: %v", batchPages, rcv.order)
	}
}
