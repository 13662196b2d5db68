package sinkcmd_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/sink"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

// env is a sink environment for tests.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// setup starts JetStream and gives the test its own ClickHouse database; it
// returns the sink's environment.
func setup(t *testing.T) env {
	t.Helper()
	addr, db := clickhousetest.NewDatabase(t)
	return env{
		"NATS_URL":            streamtest.Start(t),
		"CLICKHOUSE_ADDR":     addr,
		"CLICKHOUSE_DATABASE": db,
		"SINK_LISTEN":         "127.0.0.1:0",
		"SINK_BATCH_WAIT":     "100ms",
		"LOG_LEVEL":           "warn",
	}
}

// runningSink is a sink started in process.
type runningSink struct {
	addr string
	// cancel tells the sink to stop, stop does and waits for its end.
	cancel context.CancelFunc
	stop   func() error
	logs   *logtest.Buffer
}

// startSink runs `sink` with e and opts until stop (or the test's end).
func startSink(t *testing.T, e env, opts sinkcmd.Options) *runningSink {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	opts.Ready = func(a string) { addr <- a }
	out := &logtest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- sinkcmd.RunWithOptions(ctx, []string{"sink"}, e.get, out, io.Discard, opts) }()
	s := &runningSink{logs: out, cancel: cancel}
	select {
	case s.addr = <-addr:
	case err := <-done:
		cancel()
		t.Fatalf("sink exited: %v\n%s", err, out)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("sink did not start")
	}
	var once sync.Once
	var stopErr error
	s.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(60 * time.Second):
				stopErr = fmt.Errorf("sink did not stop")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("sink: %v", err)
		}
		if t.Failed() {
			t.Logf("sink logs:\n%s", out)
		}
	})
	return s
}

// publisher publishes deliveries the way the receiver does.
type publisher struct {
	js  jetstream.JetStream
	nc  *nats.Conn
	pub *stream.Publisher
	cfg stream.Config
}

func newPublisher(t *testing.T, natsURL string) *publisher {
	t.Helper()
	cfg, err := sinkcmd.Load(env{"NATS_URL": natsURL}.get)
	if err != nil {
		t.Fatal(err)
	}
	nc, js, err := stream.Connect(cfg.StreamConfig, "test-publisher", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := stream.EnsureStream(ctx, js, cfg.StreamConfig); err != nil {
		t.Fatal(err)
	}
	return &publisher{js: js, nc: nc, pub: stream.NewPublisher(nc, js, cfg.StreamConfig, stream.PublisherOptions{}), cfg: cfg.StreamConfig}
}

// publish validates body and stores it as the receiver would; it reports
// whether JetStream dropped it as a duplicate.
func (p *publisher) publish(t *testing.T, body []byte) bool {
	t.Helper()
	h, err := events.Validate(body)
	if err != nil {
		t.Fatalf("invalid delivery: %v\n%s", err, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := p.pub.Publish(ctx, delivery.NewEnvelope(p.cfg.SubjectPrefix, h, body, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Duplicate
}

// pageBody is a successful crawl.page delivery.
func pageBody(crawl, webhook, url, markdown string) []byte {
	return fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"metadata":{"title":"T %s","sourceURL":%q,"url":%q,"statusCode":200,"scrapeId":%q}}],"metadata":{"tenant":"acme"}}`,
		crawl, webhook, markdown, url, url, url, uuid.NewString())
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hasSample reports whether the exposition text holds the whole sample
// line (`name{label="value"} 1`), so that "… 1" does not match "… 10".
func hasSample(exposition, line string) bool {
	return slices.Contains(strings.Split(exposition, "\n"), line)
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// afterInsert wraps the archive a sink inserts into: each insert that
// commits then calls then, and answers its error, as if ClickHouse's answer
// came only then, or was lost.
type afterInsert struct {
	sink.BatchWriter
	then func() error
}

func (a afterInsert) Insert(ctx context.Context, rows archive.Rows) error {
	if err := a.BatchWriter.Insert(ctx, rows); err != nil {
		return err
	}
	return a.then()
}

// wrapInsert is sinkcmd.Options.WrapBatchWriter for an afterInsert.
func wrapInsert(then func() error) func(sink.BatchWriter) sink.BatchWriter {
	return func(w sink.BatchWriter) sink.BatchWriter { return afterInsert{BatchWriter: w, then: then} }
}
