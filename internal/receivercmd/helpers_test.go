package receivercmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/deliverytest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"

	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

const testSecret = "test-secret"

// jetStream is a JetStream server embedded in the test process.
type jetStream struct {
	t    testing.TB
	dir  string
	port int
	srv  *natsserver.Server
	url  string // set for a server the test did not start
}

// startJetStream starts a JetStream server on a free loopback port with a
// temporary store; it is shut down when the test ends.
func startJetStream(t testing.TB, syncAlways bool) *jetStream {
	t.Helper()
	js := &jetStream{t: t, dir: t.TempDir(), port: -1}
	js.start(syncAlways)
	t.Cleanup(js.stop)
	return js
}

func (j *jetStream) start(syncAlways bool) {
	j.t.Helper()
	cfg := stream.Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", j.port)}
	srv, err := stream.StartEmbedded(cfg, stream.EmbeddedConfig{StoreDir: j.dir, SyncAlways: syncAlways})
	if err != nil {
		j.t.Fatalf("start JetStream: %v", err)
	}
	j.srv = srv
	j.port = srv.Addr().(*net.TCPAddr).Port
}

func (j *jetStream) URL() string {
	if j.url != "" {
		return j.url
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", j.port)
}

// stop shuts the server down (restart with start: same port, same store).
func (j *jetStream) stop() {
	if j.srv != nil {
		j.srv.Shutdown()
		j.srv.WaitForShutdown()
		j.srv = nil
	}
}

// client connects a test client to the server.
func (j *jetStream) client(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, js := streamtest.Connect(t, j.URL())
	return js
}

// runningReceiver is a receiver started in process by startReceiver.
type runningReceiver struct {
	URL    string // http://host:port
	NATS   string
	cancel context.CancelFunc
	done   chan error
	logs   *logtest.Buffer
}

// startReceiver runs the receiver as its binary does, with env as its whole
// environment (defaults below unless env sets them), on a free loopback
// port; it is stopped when the test ends.
func startReceiver(t testing.TB, env map[string]string) *runningReceiver {
	t.Helper()
	return startReceiverWith(t, env, Options{})
}

// startReceiverWith is startReceiver with RunWithOptions' options (its
// Ready hook is replaced).
func startReceiverWith(t testing.TB, env map[string]string, opts Options) *runningReceiver {
	t.Helper()
	full := map[string]string{
		"RECEIVER_LISTEN": "127.0.0.1:0",
		"WEBHOOK_SECRETS": testSecret,
		"LOG_LEVEL":       "debug",
	}
	for k, v := range env {
		full[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningReceiver{cancel: cancel, done: make(chan error, 1), logs: &logtest.Buffer{}}
	ready := make(chan Addrs, 1)
	opts.Ready = func(a Addrs) { ready <- a }
	go func() {
		r.done <- RunWithOptions(ctx, []string{"receiver"}, func(k string) string { return full[k] }, r.logs, r.logs, opts)
	}()
	select {
	case a := <-ready:
		r.URL, r.NATS = "http://"+a.HTTP, a.NATS
	case err := <-r.done:
		t.Fatalf("receiver did not start: %v\n%s", err, r.logs)
	case <-time.After(15 * time.Second):
		t.Fatalf("receiver did not start in 15s\n%s", r.logs)
	}
	t.Cleanup(func() {
		r.stop(t)
		if t.Failed() {
			t.Logf("receiver logs:\n%s", r.logs)
		}
	})
	r.waitReady(t)
	return r
}

// stop shuts the receiver down and returns Run's error.
func (r *runningReceiver) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("receiver did not stop in 20s")
		return nil
	}
}

func (r *runningReceiver) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(r.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("receiver not ready in 10s\n%s", r.logs)
}

// answer is an HTTP answer with its body.
type answer struct {
	status int
	header http.Header
	body   string
}

// post delivers body with the given signature header value (none if empty).
func (r *runningReceiver) post(t *testing.T, body []byte, sigHeader, sig string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.URL+"/webhooks/crawl", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set(sigHeader, sig)
	}
	return do(t, req)
}

// deliver posts body signed with testSecret in X-Service-Signature.
func (r *runningReceiver) deliver(t *testing.T, body []byte) answer {
	t.Helper()
	return r.post(t, body, verify.DefaultHeader, verify.Header(testSecret, body))
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, strings.TrimSpace(string(b))}
}

// fixture and page are the shared test deliveries (deliverytest).
var (
	fixture = deliverytest.Fixture
	page    = deliverytest.Page
)

// randomText is n bytes of incompressible base64.
func randomText(n int) string {
	b := make([]byte, n*3/4+3)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)[:n]
}

// streamMsgs is the number of messages in the events stream.
func streamMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "CRAWL_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
