package reader_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
	"github.com/google/uuid"
)

// TestRequestDeadline: a request of the API or the pages has one deadline
// as a whole (READER_REQUEST_MAX_TIME): a read that would never end is
// stopped by it and answered 504 timeout, as JSON or as a page; an export
// has none (READER_EXPORT_MAX_TIME bounds it in ClickHouse). The archive
// blocks until its context ends: the test waits for the deadline, never
// times it.
func TestRequestDeadline(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	var mu sync.Mutex
	deadlines := map[string]bool{}
	a := &archivetest.Archive{Hold: func(ctx context.Context, method string) error {
		_, ok := ctx.Deadline()
		mu.Lock()
		deadlines[method] = ok
		mu.Unlock()
		if method == "ExportNDJSON" {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	a.AddJob(query.JobStatus{Crawl: archive.Crawl{CrawlID: id, Kind: "crawl"}})
	a.AddPage(query.ArchivedPage{CrawlID: id, URL: "https://r.example/", Success: true, StatusCode: 200, Document: []byte(`{"a":1}`)})
	cfg := config()
	cfg.RequestMaxTime = time.Second
	srv := startReader(t, cfg, a)

	api := get(t, srv, "/v1/search?q=kettle")
	var body reader.ErrorBody
	if err := json.Unmarshal(api.body, &body); err != nil || api.status != http.StatusGatewayTimeout || body.Error != "timeout" ||
		!strings.Contains(body.Message, "READER_REQUEST_MAX_TIME") {
		t.Errorf("API: %d %s, want 504 timeout naming READER_REQUEST_MAX_TIME", api.status, api.body)
	}
	page := get(t, srv, "/ui/jobs/"+id.String())
	if page.status != http.StatusGatewayTimeout || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.body), "READER_REQUEST_MAX_TIME") {
		t.Errorf("page: %d %s\n%s, want a page 504 naming READER_REQUEST_MAX_TIME", page.status, page.header.Get("Content-Type"), page.body)
	}
	export := get(t, srv, "/v1/jobs/"+id.String()+"/export")
	if export.status != http.StatusOK || string(export.body) != "{\"a\":1}\n" {
		t.Errorf("export: %d %q", export.status, export.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if !deadlines["Search"] || !deadlines["JobStatus"] || deadlines["ExportNDJSON"] {
		t.Errorf("reads with a deadline: %v; want Search and JobStatus, not ExportNDJSON", deadlines)
	}
}

// TestJobsListWithinItsDeadline: the jobs list's change counts may take
// half the time its request has left; a count that would never end is
// stopped there and the list is answered, without counts and saying why,
// before the request's own deadline. The archive blocks until its context
// ends: the test waits for the deadlines, never times them.
func TestJobsListWithinItsDeadline(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	a := &archivetest.Archive{Hold: func(ctx context.Context, method string) error {
		if method != "JobsChangeCounts" {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	a.AddJob(query.JobStatus{Crawl: archive.Crawl{CrawlID: id, Kind: "crawl"}})
	cfg := config()
	cfg.RequestMaxTime = time.Second
	srv := startReader(t, cfg, a)

	page := get(t, srv, "/ui/jobs")
	body := string(page.body)
	if page.status != http.StatusOK || !strings.Contains(body, id.String()) || !strings.Contains(body, `class="note counts-omitted"`) ||
		strings.Contains(body, `class="count-`) {
		t.Errorf("jobs list: %d\n%s\nwant the job listed, without counts, saying why", page.status, body)
	}
}
