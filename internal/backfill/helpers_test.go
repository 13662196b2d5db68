package backfill

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

// jetStream is an embedded JetStream server for one test.
type jetStream struct {
	srv *server.Server
	dir string
}

// startJetStream starts a JetStream server in the test process on a free
// loopback port, with its store in a temporary directory.
func startJetStream(t *testing.T) *jetStream {
	t.Helper()
	js := &jetStream{dir: t.TempDir()}
	js.start(t)
	t.Cleanup(func() { js.srv.Shutdown(); js.srv.WaitForShutdown() })
	return js
}

func (j *jetStream) start(t *testing.T) {
	t.Helper()
	srv, err := stream.StartEmbedded(stream.Config{URL: "nats://127.0.0.1:-1"}, stream.EmbeddedConfig{StoreDir: j.dir})
	if err != nil {
		t.Fatal(err)
	}
	j.srv = srv
}

// restart stops the server and starts it again on the same store.
func (j *jetStream) restart(t *testing.T) {
	t.Helper()
	j.srv.Shutdown()
	j.srv.WaitForShutdown()
	j.start(t)
}

// connect returns a JetStream client, closed at the end of the test.
func (j *jetStream) connect(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, js := streamtest.Connect(t, j.srv.ClientURL())
	return js
}

func newKVStore(t *testing.T, js jetstream.JetStream, now func() time.Time) *KVStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := stream.EnsureBackfillState(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewKVStore(kv, now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startArchive gives the test a migrated database of its own on the local
// ClickHouse and the archive on it.
func startArchive(t *testing.T) (*archive.Store, driver.Conn, string) {
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
	return w, conn, db
}

// fakeClock is a clock tests move by hand, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func httptestServer(h http.Handler) *httptest.Server { return httptest.NewServer(h) }

// newTestMetrics registers the backfill's metrics on a registry of the
// test's own, as the sink does on its.
func newTestMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// scrape returns reg in the Prometheus text format, as /metrics serves it.
func scrape(t *testing.T, reg prometheus.Gatherer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// wantSeries fails t unless reg exports every one of the sample lines
// (`name{label="value"} 1`).
func wantSeries(t *testing.T, reg prometheus.Gatherer, lines ...string) {
	t.Helper()
	out := scrape(t, reg)
	have := make(map[string]bool)
	for _, l := range strings.Split(out, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("metrics lack %q; exposition:\n%s", l, out)
		}
	}
}
