package ops

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHandler: the bodies both binaries answer on /healthz and /readyz,
// ready and not, and /metrics served from the given handler.
func TestHandler(t *testing.T) {
	t.Parallel()
	var down error
	ready := func(ctx context.Context) map[string]error {
		if _, ok := ctx.Deadline(); !ok {
			return map[string]error{"deadline": errors.New("none")}
		}
		return map[string]error{"jetstream": nil, "clickhouse": down}
	}
	_, metrics := NewRegistry()
	srv := httptest.NewServer(Handler(metrics, ready, time.Second))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path string
		down       error
		code       int
		body       string
	}{
		{"healthz", "/healthz", nil, 200, "{\"status\":\"ok\"}\n"},
		{"ready", "/readyz", nil, 200, "{\"status\":\"ready\",\"checks\":{\"clickhouse\":\"ok\",\"jetstream\":\"ok\"}}\n"},
		{"unavailable", "/readyz", errors.New("dial tcp: refused"), 503, "{\"status\":\"unavailable\",\"checks\":{\"clickhouse\":\"dial tcp: refused\",\"jetstream\":\"ok\"}}\n"},
		{"healthz while unavailable", "/healthz", errors.New("down"), 200, "{\"status\":\"ok\"}\n"},
		{"not its path", "/nope", nil, 404, "404 page not found\n"},
	} {
		down = tc.down
		if code, body := get(tc.path); code != tc.code || body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, body, tc.code, tc.body)
		}
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d %.200s", code, body)
	}
}
