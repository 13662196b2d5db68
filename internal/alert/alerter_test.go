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
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

// world is what the alerting of every sink replica shares: the archive (a
// real ClickHouse database) and JetStream (a real server, for the claims).
type world struct {
	w  *archive.Store
	js jetstream.JetStream
	nc *nats.Conn
}

func newWorld(t *testing.T) *world {
	t.Helper()
	addr, db := clickhousetest.NewDatabase(t)
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := context.Background()
	if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, js := streamtest.Connect(t, streamtest.Start(t))
	return &world{w: w, js: js, nc: nc}
}

// claims is the alerts' claims, in the bucket the sink makes for window.
func (wd *world) claims(t *testing.T, window time.Duration) *claim.KVClaims {
	t.Helper()
	kv, err := stream.EnsureAlertClaims(context.Background(), wd.js, window, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := claim.NewKV(kv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// replica is one sink replica's Alerter, running.
func (wd *world) replica(t *testing.T, cfg alert.Config) *alert.Alerter {
	t.Helper()
	return wd.replicaWith(t, cfg, wd.nc)
}

// replicaWith is replica publishing on pub.
func (wd *world) replicaWith(t *testing.T, cfg alert.Config, pub *nats.Conn) *alert.Alerter {
	t.Helper()
	claims := wd.claims(t, cfg.Window)
	a, err := alert.New(cfg, wd.w.Lookups, claims, pub, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	a.RetryDelay, a.CheckEvery = 10*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// fail archives a failed page received at `at` and tells the alerter, as
// the sink does after committing a batch.
func (wd *world) fail(t *testing.T, a *alert.Alerter, crawl, webhook uuid.UUID, url string, at time.Time) {
	t.Helper()
	err := wd.w.Insert(context.Background(), archive.Rows{Failures: []archive.Failure{
		{CrawlID: crawl, WebhookID: webhook, URL: url, StatusCode: 502, Error: "Request failed with status code 502", ReceivedAt: at},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a.Failed(crawl.String())
}

// hook is an ALERT_WEBHOOK_URL that fails its first answer.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	calls  int
	bodies []map[string]any
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls++
		if h.calls == 1 {
			http.Error(w, "try later", http.StatusBadGateway)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s with %s", r.Method, r.Header.Get("Content-Type"))
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("alert body %s: %v", b, err)
		}
		h.bodies = append(h.bodies, m)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) posted() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.bodies...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOneAlertAcrossReplicas: two replicas share a crawl's failures (each
// sees some); together they reach the threshold, and exactly one alert is
// POSTed (after one retry of the webhook) and published on crawl.alerts.
// A replica started afterwards (a restart) does not alert again within the
// window; failures redelivered count once.
func TestOneAlertAcrossReplicas(t *testing.T) {
	t.Parallel()
	wd := newWorld(t)
	h := newHook(t)
	sub, err := wd.nc.SubscribeSync(alert.Subject)
	if err != nil {
		t.Fatal(err)
	}
	cfg := alert.Config{WebhookURL: h.URL, Threshold: 4, Window: time.Hour}
	r1, r2 := wd.replica(t, cfg), wd.replica(t, cfg)
	crawl, other := uuid.New(), uuid.New()
	now := time.Now()

	w1 := uuid.New()
	wd.fail(t, r1, crawl, w1, "https://x.test/1", now)
	wd.fail(t, r2, crawl, w1, "https://x.test/1", now) // a redelivery: still one
	wd.fail(t, r2, crawl, uuid.New(), "https://x.test/2", now)
	wd.fail(t, r1, other, uuid.New(), "https://y.test/1", now)
	wd.fail(t, r1, crawl, uuid.New(), "https://x.test/3", now.Add(-2*time.Hour)) // outside the window
	time.Sleep(300 * time.Millisecond)
	if got := h.posted(); len(got) != 0 {
		t.Fatalf("alert below the threshold: %v", got)
	}
	wd.fail(t, r1, crawl, uuid.New(), "https://x.test/4", now)
	wd.fail(t, r2, crawl, uuid.New(), "https://x.test/5", now.Add(time.Second))
	waitFor(t, "the alert", func() bool { return len(h.posted()) == 1 })

	r3 := wd.replica(t, cfg)
	wd.fail(t, r3, crawl, uuid.New(), "https://x.test/6", now)
	wd.fail(t, r1, crawl, uuid.New(), "https://x.test/7", now)
	time.Sleep(500 * time.Millisecond)

	got := h.posted()
	if len(got) != 1 || r1.Raised()+r2.Raised()+r3.Raised() != 1 {
		t.Fatalf("%d alerts POSTed, raised %d+%d+%d; want exactly one", len(got), r1.Raised(), r2.Raised(), r3.Raised())
	}
	a := got[0]
	text, _ := a["text"].(string)
	if a["crawlId"] != crawl.String() || a["threshold"] != float64(4) || a["window"] != "1h0m0s" ||
		a["lastError"] != "Request failed with status code 502" || !strings.Contains(text, "crawl "+crawl.String()) {
		t.Errorf("alert body %v", a)
	}
	if n, _ := a["failures"].(float64); n < 4 || n > 5 {
		t.Errorf("failures %v, want the 4 or 5 in the window at the time", a["failures"])
	}
	msg, err := sub.NextMsg(2 * time.Second)
	if err != nil {
		t.Fatalf("no alert on %s: %v", alert.Subject, err)
	}
	var published map[string]any
	if err := json.Unmarshal(msg.Data, &published); err != nil || published["crawlId"] != crawl.String() {
		t.Errorf("published %s", msg.Data)
	}
	if extra, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("a second alert published: %s", extra.Data)
	}
}

// TestAlertAgainNextWindow: a claim expires with the window, and failures
// that reach the threshold again then raise a new alert.
func TestAlertAgainNextWindow(t *testing.T) {
	t.Parallel()
	wd := newWorld(t)
	h := newHook(t)
	cfg := alert.Config{WebhookURL: h.URL, Threshold: 2, Window: 2 * time.Second}
	r := wd.replica(t, cfg)
	crawl := uuid.New()
	for i := range 2 {
		wd.fail(t, r, crawl, uuid.New(), fmt.Sprintf("https://x.test/%d", i), time.Now())
	}
	waitFor(t, "the first alert", func() bool { return len(h.posted()) == 1 })
	time.Sleep(3 * time.Second)
	for i := range 2 {
		wd.fail(t, r, crawl, uuid.New(), fmt.Sprintf("https://x.test/again/%d", i), time.Now())
	}
	waitFor(t, "the second alert", func() bool { return len(h.posted()) == 2 })
}

// TestFailureNeverBlocks: with ClickHouse answering nothing useful and no
// Run, Failure returns at once, however many crawls fail.
func TestFailureNeverBlocks(t *testing.T) {
	t.Parallel()
	wd := newWorld(t)
	claims := wd.claims(t, time.Hour)
	a, err := alert.New(alert.Config{WebhookURL: "http://127.0.0.1:1/", Threshold: 1, Window: time.Hour}, wd.w, claims, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// Blocking would mean waiting on ClickHouse or the webhook, which never
	// answer here: the calls would not return at all.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10000 {
			a.Failed(fmt.Sprint(i))
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Failure blocked: 10000 calls did not return")
	}
}
