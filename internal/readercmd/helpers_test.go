package readercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/readercmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

const testToken = "reader-test-token-0123456789"

// archiveDB gives the test a migrated database of its own and a Store on it.
func archiveDB(t *testing.T) (archive.Config, *archive.Store) {
	t.Helper()
	addr, db := clickhousetest.NewDatabase(t)
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn := clickhousetest.Open(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, w
}

// deliver archives one webhook body as received at at.
func deliver(t *testing.T, w *archive.Store, body string, at time.Time) {
	t.Helper()
	ev, err := events.DecodeAccepted([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := archive.EventRows(ev, []byte(body), at)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

func pageBody(job, url, title, markdown, html string, status int) string {
	return fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"html":%q,"metadata":{"url":%q,"sourceURL":%q,"statusCode":%d,"title":%q}}]}`,
		job, uuid.NewString(), markdown, html, url, url, status, title)
}

func failureBody(job, url, errText string) string {
	return fmt.Sprintf(`{"success":false,"type":"crawl.page","id":%q,"webhookId":%q,"error":%q,"data":[{"markdown":"","metadata":{"url":%q,"sourceURL":%q,"statusCode":500}}]}`,
		job, uuid.NewString(), errText, url, url)
}

// startReader runs the reader binary in process as users start it, with
// env over the defaults of a test (a free port, the test's database,
// testToken), until the test ends; it returns the base URL.
func startReader(t *testing.T, cfg archive.Config, env map[string]string) string {
	t.Helper()
	return startReaderWith(t, cfg, env, readercmd.Options{})
}

// startReaderWith is startReader with hooks (its Ready is set here).
func startReaderWith(t *testing.T, cfg archive.Config, env map[string]string, opts readercmd.Options) string {
	t.Helper()
	vars := map[string]string{
		"READER_LISTEN":       "127.0.0.1:0",
		"CLICKHOUSE_ADDR":     cfg.Addr,
		"CLICKHOUSE_DATABASE": cfg.Database,
		"READER_TOKENS":       testToken,
		"READER_CURSOR_KEY":   "a cursor key of the test",
		"READER_FEED_SETTLE":  "1ms",
		"LOG_LEVEL":           "warn",
		// What the reader answers is under test here, not how long it
		// takes: on a busy machine every test's reader shares one
		// ClickHouse, and a read past the default deadlines (10 s a
		// query, 30 s a request) is no finding. The deadlines themselves
		// are tested in internal/reader (TestRequestDeadline).
		"READER_QUERY_MAX_TIME":   "2m",
		"READER_REQUEST_MAX_TIME": "5m",
	}
	for k, v := range env {
		vars[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		opts.Ready = func(addr string) { ready <- addr }
		done <- readercmd.RunWithOptions(ctx, []string{"reader"}, func(k string) string { return vars[k] }, io.Discard, io.Discard, opts)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reader: %v", err)
		}
	})
	select {
	case addr := <-ready:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("reader did not start: %v", err)
	}
	return ""
}

// get requests url with the token (none when token is ""). An answer that
// asks to be retried later (429 overloaded or 503 unavailable, with
// Retry-After) is retried as the API tells clients to, a few times: on a
// busy machine every test's reader shares one ClickHouse and its read
// slots, and a read that waited past READER_QUERY_MAX_TIME for one is a
// client's retry, not a finding. No test here expects either status.
func get(t *testing.T, url, token string) (*http.Response, []byte) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		resp, body := getOnce(t, url, token)
		retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
		if !retry || resp.Header.Get("Retry-After") == "" || attempt == 5 {
			return resp, body
		}
		t.Logf("GET %s: %d %s; retrying", url, resp.StatusCode, body)
		time.Sleep(time.Second)
	}
}

func getOnce(t *testing.T, url, token string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp, b
}

// getJSON GETs url with the token, wants status, and decodes the body.
func getJSON(t *testing.T, url string, status int, v any) {
	t.Helper()
	resp, body := get(t, url, testToken)
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %d %s, want %d", url, resp.StatusCode, body, status)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: Content-Type %q", url, resp.Header.Get("Content-Type"))
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}
