package alert_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/rs/zerolog"
)

func TestCounter(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	f := func(crawl string, webhook int, at time.Duration) alert.Failure {
		return alert.Failure{CrawlID: crawl, WebhookID: fmt.Sprint(webhook), URL: fmt.Sprintf("https://x/%d", webhook), Error: "boom", At: t0.Add(at)}
	}
	for _, tc := range []struct {
		name     string
		failures []alert.Failure
		want     []int // indexes of failures that raise an alert
	}{
		{"below threshold", []alert.Failure{f("a", 1, 0), f("a", 2, time.Minute)}, nil},
		{"reaches threshold once", []alert.Failure{f("a", 1, 0), f("a", 2, time.Second), f("a", 3, 2*time.Second), f("a", 4, 3*time.Second), f("a", 5, 4*time.Second)}, []int{2}},
		{"redeliveries do not count", []alert.Failure{f("a", 1, 0), f("a", 1, time.Second), f("a", 2, 2*time.Second), f("a", 2, 3*time.Second)}, nil},
		{"spread beyond the window", []alert.Failure{f("a", 1, 0), f("a", 2, 6*time.Minute), f("a", 3, 11*time.Minute)}, nil},
		{"per crawl", []alert.Failure{f("a", 1, 0), f("b", 2, 0), f("a", 3, 0), f("b", 4, 0), f("b", 5, 0)}, []int{4}},
		{"again in the next window", []alert.Failure{f("a", 1, 0), f("a", 2, 0), f("a", 3, 0), f("a", 4, 5*time.Minute), f("a", 5, 10*time.Minute), f("a", 6, 10*time.Minute), f("a", 7, 10*time.Minute)}, []int{2, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := alert.NewCounter(alert.Config{Threshold: 3, Window: 10 * time.Minute})
			var got []int
			for i, fl := range tc.failures {
				if a, ok := c.Add(fl); ok {
					got = append(got, i)
					if a.CrawlID != fl.CrawlID || a.Failures != 3 || !strings.Contains(a.Text, fl.CrawlID) {
						t.Errorf("alert %+v", a)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("alerts at %v, want %v", got, tc.want)
			}
		})
	}
}

type pubFunc func(string, []byte) error

func (f pubFunc) Publish(s string, b []byte) error { return f(s, b) }

// TestAlerterPost checks the POSTed JSON (Slack's text field included), the
// retry of a failed POST, and that one alert is sent for many failures.
func TestAlerterPost(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			http.Error(w, "try later", http.StatusBadGateway)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s with %s", r.Method, r.Header.Get("Content-Type"))
		}
		bodies = append(bodies, string(b))
	}))
	defer srv.Close()

	var published []string
	pub := pubFunc(func(subject string, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if subject != alert.Subject {
			t.Errorf("published to %s", subject)
		}
		published = append(published, string(b))
		return nil
	})
	a, err := alert.New(alert.Config{WebhookURL: srv.URL, Threshold: 2, Window: time.Minute}, pub, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	a.RetryDelay = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()

	at := time.Now()
	for i := range 10 {
		a.Failure(alert.Failure{CrawlID: "c1", WebhookID: fmt.Sprint(i), URL: "https://x/" + fmt.Sprint(i), Error: "HTTP 500", At: at})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(bodies)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || calls != 2 || len(published) != 1 || a.Raised() != 1 {
		t.Fatalf("posted %d (calls %d), published %d, raised %d; want 1 alert after one retry", len(bodies), calls, len(published), a.Raised())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &got); err != nil {
		t.Fatal(err)
	}
	text, _ := got["text"].(string)
	if !strings.Contains(text, "crawl c1") || !strings.Contains(text, "2 failed pages") || got["crawlId"] != "c1" || got["failures"] != float64(2) || got["threshold"] != float64(2) || got["lastError"] != "HTTP 500" {
		t.Errorf("alert body %s", bodies[0])
	}
	if published[0] != bodies[0] {
		t.Errorf("NATS and webhook alerts differ:\n%s\n%s", published[0], bodies[0])
	}
}

// TestFailureNeverBlocks: with nobody sending (Run not started) and the
// webhook hanging, Failure returns at once even past the queue's size.
func TestFailureNeverBlocks(t *testing.T) {
	t.Parallel()
	a, err := alert.New(alert.Config{WebhookURL: "http://127.0.0.1:1/", Threshold: 1, Window: time.Hour}, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 1000 {
		a.Failure(alert.Failure{CrawlID: fmt.Sprint(i), WebhookID: "w", At: start})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("1000 failures took %v", d)
	}
	if a.Raised() != 1000 {
		t.Errorf("raised %d", a.Raised())
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  alert.Config
		ok   bool
	}{
		{"defaults", alert.Config{Threshold: 5, Window: 10 * time.Minute}, true},
		{"webhook", alert.Config{WebhookURL: "https://hooks.slack.com/services/x", Threshold: 5, Window: time.Minute}, true},
		{"zero threshold", alert.Config{Threshold: 0, Window: time.Minute}, false},
		{"no window", alert.Config{Threshold: 1}, false},
		{"bad url", alert.Config{WebhookURL: "ftp://x", Threshold: 1, Window: time.Minute}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
