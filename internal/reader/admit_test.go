package reader_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/rs/zerolog"
)

// gatedArchive holds every search and export it is asked for until the
// test opens the gate, telling the test when each has begun: requests in
// progress, at the moment the test chooses, whatever the machine's speed.
// Nothing else of the archive is asked for here.
type gatedArchive struct {
	reader.Archive
	entered chan string
	gate    chan struct{}
}

func (a gatedArchive) hold(ctx context.Context, what string) {
	a.entered <- what
	select {
	case <-a.gate:
	case <-ctx.Done():
	}
}

func (a gatedArchive) Search(ctx context.Context, _ query.SearchQuery) (query.SearchPage, error) {
	a.hold(ctx, "search")
	return query.SearchPage{}, nil
}

func (a gatedArchive) ExportNDJSON(ctx context.Context, _ string, w io.Writer) (int64, error) {
	a.hold(ctx, "export")
	n, err := io.WriteString(w, "{}\n")
	return int64(n), err
}

// TestRequestsAndExportsInFlightAreBounded: past READER_MAX_EXPORTS
// exports in progress, another export is answered 429 overloaded with
// Retry-After, and past READER_MAX_INFLIGHT requests, any request is; a
// request refused takes no slot, and once the requests held are answered
// the same requests are served.
func TestRequestsAndExportsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	a := gatedArchive{entered: make(chan string, 8), gate: make(chan struct{})}
	api, err := reader.New(reader.Config{OpenAccess: true, QueryMaxTime: time.Second, ExportMaxTime: time.Second, QueryMaxRows: 1000,
		QueryMaxMemory: 1 << 30, QueryThreads: 1, QueryConcurrency: 1, SearchCandidates: 1000, SearchMaxTime: time.Second, MaxInflight: 2, MaxExports: 1},
		reader.Deps{Log: zerolog.Nop(), Archive: a, Ping: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	var open sync.Once
	release := func() { open.Do(func() { close(a.gate) }) }
	t.Cleanup(release) // before srv.Close, which waits for the requests held
	const job = "/v1/jobs/0190a4c6-7f3e-7a4c-9b2d-5e8f1a2b3c4d/export?format=ndjson"

	// A request the reader failed to refuse would wait at the gate: the
	// client gives up rather than hang the test.
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body reader.ErrorBody
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &body)
		return resp.StatusCode, body.Error, resp.Header.Get("Retry-After")
	}
	held := make(chan int, 2)
	hold := func(path, what string) {
		go func() {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				held <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			held <- resp.StatusCode
		}()
		if got := <-a.entered; got != what {
			t.Fatalf("the archive began %s, want %s", got, what)
		}
	}

	hold(job, "export")
	if status, code, retry := get(job); status != http.StatusTooManyRequests || code != "overloaded" || retry == "" {
		t.Fatalf("a second export while one runs: %d %q Retry-After %q, want 429 overloaded with Retry-After", status, code, retry)
	}
	hold("/v1/search?q=plum", "search")
	for _, path := range []string{"/v1/search?q=kettle", job, "/ui/search?q=kettle"} {
		if status, code, retry := get(path); status != http.StatusTooManyRequests || code != "overloaded" || retry == "" {
			t.Errorf("%s with two requests in progress: %d %q Retry-After %q, want 429 overloaded with Retry-After", path, status, code, retry)
		}
	}
	release()
	for range 2 {
		if status := <-held; status != http.StatusOK {
			t.Errorf("a request held: %d, want 200", status)
		}
	}
	for _, path := range []string{"/v1/search?q=kettle", job} {
		if status, _, _ := get(path); status != http.StatusOK {
			t.Errorf("%s once the others are answered: %d, want 200", path, status)
		}
	}
}
