package receivercmd

import (
	"context"
	"errors"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/rs/zerolog"
)

// failingPublisher fails every publish with err.
type failingPublisher struct{ err error }

func (p failingPublisher) Publish(context.Context, *delivery.Envelope) (stream.Ack, error) {
	return stream.Ack{}, p.err
}

// TestInternalErrorCounted: an error outside the status table is answered
// 500 without its text and counted as outcome="error" (the chart's 5xx
// alert sums it), while a JetStream failure stays "unavailable".
func TestInternalErrorCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		wantMetric string
	}{
		{"internal", errors.New("boom: secret internals"), 500, `crawlhouse_webhook_deliveries_total{outcome="error"} 1`},
		{"unavailable", stream.ErrUnavailable, 503, `crawlhouse_webhook_deliveries_total{outcome="unavailable"} 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := receiver.Load(func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			cfg.AllowUnsigned = true // no verifier: unsigned deliveries pass
			cfg.MaxInflight = 4
			s := receiver.New(cfg, receiver.Auth{}, receiver.Deps{Log: zerolog.Nop(), Publisher: failingPublisher{tc.err}})
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			body, _ := page(t, "x")
			req, _ := http.NewRequest(http.MethodPost, ts.URL+cfg.Path, strings.NewReader(string(body)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || strings.Contains(string(b), "boom") {
				t.Errorf("answer %d %s, want %d without the error's text", resp.StatusCode, b, tc.status)
			}
			m := get(t, ts.URL+"/metrics")
			if !strings.Contains(m, tc.wantMetric) {
				t.Errorf("metrics lack %s:\n%s", tc.wantMetric, m)
			}
			if !strings.Contains(m, "crawlhouse_webhook_publish_seconds_count 1") {
				t.Error("publish histogram did not observe the attempt")
			}
		})
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
