package reader_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"github.com/rs/zerolog"
)

// config is a valid Config of the tests, open access.
func config() reader.Config {
	return reader.Config{OpenAccess: true, QueryMaxTime: time.Second, ExportMaxTime: time.Second, RequestMaxTime: time.Minute, QueryMaxRows: 1000,
		QueryMaxMemory: 1 << 30, QueryThreads: 1, QueryConcurrency: 1, SearchCandidates: 1000, SearchMaxTime: time.Second, MaxInflight: 8, MaxExports: 2}
}

// startReader serves the API of cfg over a, with the web pages over the
// same archive, as the reader binary wires them (internal/readercmd).
func startReader(t *testing.T, cfg reader.Config, a reader.Archive) *httptest.Server {
	t.Helper()
	pages, err := web.New(a, web.Options{Base: web.DefaultBase, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	api, err := reader.New(cfg, reader.Deps{Log: zerolog.Nop(), Archive: a, Ping: func(context.Context) error { return nil }, Pages: pages})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// answer is an answer of the reader.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// client gives up on a request the reader failed to answer rather than
// hang the test.
var client = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, srv *httptest.Server, path string) answer {
	t.Helper()
	resp, err := client.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}
