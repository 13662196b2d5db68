package reader_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
	"github.com/google/uuid"
)

// gated is an archive of one job that holds every search and export it is
// asked for until the test opens the gate, telling the test when each has
// begun: requests in progress, at the moment the test chooses, whatever
// the machine's speed.
func gated() (a *archivetest.Archive, entered chan string, release func(), job string) {
	id := uuid.New()
	entered, gate := make(chan string, 8), make(chan struct{})
	a = &archivetest.Archive{Hold: func(ctx context.Context, method string) error {
		if method != "Search" && method != "ExportNDJSON" {
			return nil
		}
		entered <- method
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	a.AddJob(query.JobStatus{Crawl: archive.Crawl{CrawlID: id, Kind: "crawl"}})
	a.AddPage(query.ArchivedPage{CrawlID: id, URL: "https://r.example/", Success: true, StatusCode: 200, Document: []byte(`{}`)})
	var open sync.Once
	return a, entered, func() { open.Do(func() { close(gate) }) }, id.String()
}

// TestRequestsAndExportsInFlightAreBounded: past READER_MAX_EXPORTS
// exports in progress, another export is answered 429 overloaded with
// Retry-After, and past READER_MAX_INFLIGHT requests, any request is (a
// page as a page, with the same status and Retry-After); a request
// refused takes no slot, and once the requests held are answered the same
// requests are served.
func TestRequestsAndExportsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	a, entered, release, id := gated()
	cfg := config()
	cfg.MaxInflight, cfg.MaxExports = 2, 1
	srv := startReader(t, cfg, a)
	t.Cleanup(release) // before srv.Close, which waits for the requests held
	job := "/v1/jobs/" + id + "/export?format=ndjson"

	overloaded := func(path string) string {
		a := get(t, srv, path)
		var body reader.ErrorBody
		_ = json.Unmarshal(a.body, &body)
		switch {
		case a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "":
			return "status " + http.StatusText(a.status) + ", Retry-After " + a.header.Get("Retry-After")
		case strings.HasPrefix(path, "/ui/") && !strings.HasPrefix(a.header.Get("Content-Type"), "text/html"):
			return "a page answered as " + a.header.Get("Content-Type") + ": " + string(a.body)
		case !strings.HasPrefix(path, "/ui/") && body.Error != "overloaded":
			return "body " + string(a.body)
		}
		return ""
	}
	held := make(chan int, 2)
	hold := func(path, what string) {
		go func() {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				held <- 0
				return
			}
			resp.Body.Close()
			held <- resp.StatusCode
		}()
		if got := <-entered; got != what {
			t.Fatalf("the archive began %s, want %s", got, what)
		}
	}

	hold(job, "ExportNDJSON")
	if why := overloaded(job); why != "" {
		t.Fatalf("a second export while one runs: %s; want 429 overloaded with Retry-After", why)
	}
	hold("/v1/search?q=plum", "Search")
	for _, path := range []string{"/v1/search?q=kettle", job, "/ui/search?q=kettle"} {
		if why := overloaded(path); why != "" {
			t.Errorf("%s with two requests in progress: %s; want 429 overloaded with Retry-After", path, why)
		}
	}
	release()
	for range 2 {
		if status := <-held; status != http.StatusOK {
			t.Errorf("a request held: %d, want 200", status)
		}
	}
	for _, path := range []string{"/v1/search?q=kettle", job, "/ui/search?q=kettle"} {
		if a := get(t, srv, path); a.status != http.StatusOK {
			t.Errorf("%s once the others are answered: %d, want 200", path, a.status)
		}
	}
}
