package receiver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/deliverytest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

const testSecret = "test-secret"

// testServer is a Server behind httptest, storing into a real JetStream
// embedded in the test process: the handler as the binary serves it,
// without the binary's start-up.
type testServer struct {
	*Server
	URL  string
	js   jetstream.JetStream // a client of its own, for the test's reads
	logs *logtest.Buffer
	reg  *prometheus.Registry
}

// startServer builds a Server from env (with WEBHOOK_SECRETS=testSecret
// unless env sets it; a map-backed getenv, as the binary reads its own)
// storing through a *stream.Publisher (grouping its publishes with
// RECEIVER_GROUP_COMMIT=true) into a fresh embedded JetStream.
// wrap, when given, wraps that publisher (a test watching or holding the
// publish). The stream is created before startServer returns.
func startServer(t testing.TB, env map[string]string, wrap ...func(Publisher) Publisher) *testServer {
	t.Helper()
	url := streamtest.Start(t)
	nc, js := streamtest.Connect(t, url)
	return startServerOn(t, env, nc.ConnectedUrl(), js, func(cfg Config) Publisher {
		// RECEIVER_GROUP_COMMIT=true as the binary reads it (receivercmd).
		p := stream.NewPublisher(nc, js, cfg.StreamConfig, stream.PublisherOptions{GroupCommit: env["RECEIVER_GROUP_COMMIT"] == "true"})
		t.Cleanup(p.Close)
		return p
	}, wrap...)
}

// startServerOn is startServer with the publisher newPub makes, on the
// JetStream at url (whose client js creates the stream).
func startServerOn(t testing.TB, env map[string]string, url string, js jetstream.JetStream, newPub func(Config) Publisher, wrap ...func(Publisher) Publisher) *testServer {
	t.Helper()
	full := map[string]string{"WEBHOOK_SECRETS": testSecret, "NATS_URL": url, "LOG_LEVEL": "debug"}
	for k, v := range env {
		full[k] = v
	}
	cfg, err := Load(func(k string) string { return full[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	level, err := zerolog.ParseLevel(full["LOG_LEVEL"])
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(logs).Level(level)
	auth, err := NewAuth(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	pub := newPub(cfg)
	for _, w := range wrap {
		pub = w(pub)
	}
	reg, metrics := ops.NewRegistry()
	s := New(cfg, auth, Deps{Log: log, Publisher: pub, JetStream: js, Registry: reg, Metrics: metrics})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.Prepare(ctx, nil, pub) // no write-ahead log: returns once the stream exists
	if !s.ready.Load() {
		t.Fatalf("the stream was not created in 30s\n%s", logs)
	}
	hs := httptest.NewUnstartedServer(s.Handler())
	// As the binary's listener (receivercmd.listen): the body's read is
	// bounded by RECEIVER_READ_TIMEOUT.
	hs.Config.ReadTimeout = cfg.ReadTimeout
	hs.Start()
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("receiver logs:\n%s", logs)
		}
	})
	return &testServer{Server: s, URL: hs.URL, js: js, logs: logs, reg: reg}
}

// answer is an HTTP answer with its body (trimmed).
type answer struct {
	status int
	header http.Header
	body   string
}

// post delivers body with the headers h.
func (s *testServer) post(t testing.TB, body []byte, h map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/webhooks/crawl", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

// deliver posts body signed with testSecret in X-Service-Signature.
func (s *testServer) deliver(t testing.TB, body []byte) answer {
	t.Helper()
	return s.post(t, body, map[string]string{verify.DefaultHeader: verify.Header(testSecret, body)})
}

func do(t testing.TB, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, strings.TrimSpace(string(b))}
}

// metrics is the /metrics page.
func (s *testServer) metrics(t testing.TB) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req).body
}

// streamMsgs is the number of messages in the events stream.
func (s *testServer) streamMsgs(t testing.TB) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// lastMsg is the last message on subject.
func (s *testServer) lastMsg(t testing.TB, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatalf("last message on %s: %v", subject, err)
	}
	return msg
}

// fixture and page are the shared test deliveries (deliverytest).
var (
	fixture = deliverytest.Fixture
	page    = deliverytest.Page
)
