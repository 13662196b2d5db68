package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"

	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/google/uuid"
	natsserver "github.com/nats-io/nats-server/v2/server"
)

// The credentials TestSecretsNeverLogged hands the binaries. Each is
// distinctive, so that any appearance in a log line or an error is found.
const (
	leakWebhookSecret = "whsec-leak-4c1d9a0e"
	leakNATSPassword  = "natspw-leak-7b2e5f19"
	leakCHPassword    = "chpass-leak-3a9d7e21"
	leakAPIKey        = "fc-apikey-leak-6e1b0c94"
	leakHookPath      = "hookpath-leak-8d2f7a"
	leakHookQuery     = "hookquery-leak-5c7a31"
)

var leakSecrets = []string{leakWebhookSecret, leakNATSPassword, leakCHPassword, leakAPIKey, leakHookPath, leakHookQuery}

// authNATS runs a JetStream server that requires a user and password, as a
// production one does, and returns its address.
func authNATS(t *testing.T) string {
	t.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		Username: "crawl", Password: leakNATSPassword, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.Addr().String()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// running is a receiver or sink started through its Run, with its stdout
// and stderr collected.
type running struct {
	out     *logtest.Buffer
	addr    string
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
	stopErr error
}

func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case r.stopErr = <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("did not stop in 30s")
		}
	})
	return r.stopErr
}

func (r *running) waitLog(t *testing.T, what string) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("%q in the logs", what), func() bool { return strings.Contains(r.out.String(), what) })
}

func runReceiver(t *testing.T, e env) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{out: &logtest.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan receivercmd.Addrs, 1)
	go func() {
		r.done <- receivercmd.RunWithOptions(ctx, []string{"receiver"}, e.get, r.out, r.out, receivercmd.Options{Ready: func(a receivercmd.Addrs) { ready <- a }})
	}()
	select {
	case a := <-ready:
		r.addr = a.HTTP
	case err := <-r.done:
		t.Fatalf("receiver exited: %v", err)
	}
	t.Cleanup(func() { _ = r.stop(t) })
	return r
}

func runSink(t *testing.T, e env) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{out: &logtest.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		r.done <- sinkcmd.RunWithOptions(ctx, []string{"sink"}, e.get, r.out, r.out, sinkcmd.Options{Ready: func(a string) { ready <- a }})
	}()
	select {
	case r.addr = <-ready:
	case err := <-r.done:
		t.Fatalf("sink exited: %v", err)
	}
	t.Cleanup(func() { _ = r.stop(t) })
	return r
}

// TestSecretsNeverLogged runs the receiver and the sink as users start them,
// with every credential they take set (a NATS URL with a password, the
// ClickHouse password, the crawl API key, an alert webhook URL with tokens
// in its path and query, the HMAC secret), through the paths where those
// values reach errors: NATS unreachable, ClickHouse unreachable,
// the alert webhook answering 500 and then unreachable, the crawl API
// answering 401, refused configurations. None of the secrets may appear in
// anything the binaries write or return.
func TestSecretsNeverLogged(t *testing.T) {
	var outputs []string
	keep := func(what string, s string) { outputs = append(outputs, what+": "+s) }
	defer func() {
		for _, s := range leakSecrets {
			for _, o := range outputs {
				if strings.Contains(o, s) {
					t.Errorf("the secret %q appears in %s", s, o)
				}
			}
		}
	}()
	chAddr, db := clickhousetest.NewDatabase(t)
	natsDown := "nats://crawl:" + leakNATSPassword + "@" + closedAddr(t)
	natsUp := "nats://crawl:" + leakNATSPassword + "@" + authNATS(t)

	// The crawl API refuses the key, as the real one does.
	var apiCalls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"success":false,"error":"Unauthorized: Invalid token"}`))
	}))
	defer api.Close()
	// The alert webhook answers 500 once, then is gone.
	var hookCalls atomic.Int32
	hookLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hook := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hookCalls.Add(1) == 1 {
			// Closed after this answer, as the listener: the retries find
			// nobody.
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusInternalServerError)
			go func() { _ = hookLn.Close() }()
		}
	})}
	go func() { _ = hook.Serve(hookLn) }()
	defer hook.Close()
	hookURL := (&url.URL{Scheme: "http", Host: hookLn.Addr().String(), Path: "/services/T0001/B0002/" + leakHookPath,
		RawQuery: url.Values{"token": {leakHookQuery}}.Encode()}).String()

	sinkEnv := env{
		"NATS_URL": natsUp, "CLICKHOUSE_ADDR": chAddr, "CLICKHOUSE_DATABASE": db, "SINK_LISTEN": "127.0.0.1:0",
		"SINK_BATCH_WAIT": "100ms", "LOG_LEVEL": "debug",
		"CRAWL_API_URL": api.URL, "CRAWL_API_KEY": leakAPIKey, "BACKFILL_QUIET_PERIOD": "1s",
		"ALERT_WEBHOOK_URL": hookURL, "ALERT_FAILURE_THRESHOLD": "1",
	}
	recvEnv := env{"RECEIVER_LISTEN": "127.0.0.1:0", "WEBHOOK_SECRETS": leakWebhookSecret, "NATS_URL": natsUp, "LOG_LEVEL": "debug"}

	t.Run("dependencies down or refusing", func(t *testing.T) {
		// NATS unreachable at a URL with a password; ClickHouse refusing it.
		down := env{}
		for k, v := range recvEnv {
			down[k] = v
		}
		down["NATS_URL"] = natsDown
		r := runReceiver(t, down)
		r.waitLog(t, "stream not created yet")
		body := []byte(`{"success":true,"type":"crawl.page","id":"` + uuid.NewString() + `","webhookId":"` + uuid.NewString() + `","data":[]}`)
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/webhooks/crawl", bytes.NewReader(body))
		req.Header.Set(verify.FirecrawlHeader, verify.Header(leakWebhookSecret, body))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		keep("receiver with NATS down: error", fmt.Sprint(r.stop(t)))
		keep("receiver with NATS down: logs", r.out.String())

		// ClickHouse is unreachable, not refusing the password: the test
		// server (chdb) stops answering after a failed password handshake,
		// which would take every other test's ClickHouse with it.
		chDown := closedAddr(t)
		s := runSink(t, env{"NATS_URL": natsDown, "CLICKHOUSE_ADDR": chDown, "CLICKHOUSE_DATABASE": db,
			"CLICKHOUSE_PASSWORD": leakCHPassword, "SINK_LISTEN": "127.0.0.1:0", "LOG_LEVEL": "debug",
			"CRAWL_API_URL": api.URL, "CRAWL_API_KEY": leakAPIKey, "ALERT_WEBHOOK_URL": hookURL})
		s.waitLog(t, "start-up failed")
		keep("sink with NATS and ClickHouse down: error", fmt.Sprint(s.stop(t)))
		keep("sink with NATS and ClickHouse down: logs", s.out.String())
		if !strings.Contains(s.out.String(), "connection refused") {
			t.Errorf("the sink did not report ClickHouse unreachable:\n%s", s.out.String())
		}

		// One-off commands and refused configurations: their errors.
		var out logtest.Buffer
		err := sinkcmd.Run(t.Context(), []string{"sink", "migrate"}, env{"CLICKHOUSE_ADDR": chDown, "CLICKHOUSE_PASSWORD": leakCHPassword}.get, &out, &out)
		if err == nil {
			t.Error("sink migrate without ClickHouse succeeded")
		}
		keep("sink migrate without ClickHouse", fmt.Sprint(err)+out.String())
		for name, bad := range map[string]env{
			"receiver: bad NATS URL": {"WEBHOOK_SECRETS": leakWebhookSecret, "NATS_URL": "nats://crawl:" + leakNATSPassword + "@127.0.0.1:notaport"},
			"receiver: bad listen":   {"WEBHOOK_SECRETS": leakWebhookSecret, "NATS_URL": natsDown, "RECEIVER_LISTEN": leakAPIKey},
			"receiver: bad path":     {"WEBHOOK_SECRETS": leakWebhookSecret, "NATS_URL": natsDown, "WEBHOOK_PATH": leakHookPath},
		} {
			out = logtest.Buffer{}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			err := receivercmd.Run(ctx, []string{"receiver"}, bad.get, &out, &out)
			cancel()
			keep(name, fmt.Sprint(err)+out.String())
		}
		for name, bad := range map[string]env{
			"sink: bad alert URL":  {"ALERT_WEBHOOK_URL": "ftp://x:" + leakHookPath + "@host/" + leakHookQuery},
			"sink: bad API URL":    {"CRAWL_API_URL": "http://u:" + leakAPIKey + "@[::1"},
			"sink: bad NATS URL":   {"NATS_URL": "nats://crawl:" + leakNATSPassword + "@127.0.0.1:notaport", "CLICKHOUSE_ADDR": chAddr},
			"sink: bad ClickHouse": {"CLICKHOUSE_ADDR": "u:" + leakCHPassword + "@host"},
		} {
			out = logtest.Buffer{}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			err := sinkcmd.Run(ctx, []string{"sink", "migrate"}, bad.get, &out, &out)
			cancel()
			keep(name, fmt.Sprint(err)+out.String())
		}
	})

	t.Run("alert webhook and crawl API failing", func(t *testing.T) {
		r := runReceiver(t, recvEnv)
		s := runSink(t, sinkEnv)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("receiver logs:\n%s\nsink logs:\n%s", r.out, s.out)
			}
		})
		crawl := uuid.NewString()
		body := failedBody(crawl, uuid.NewString(), "https://example.com/broken")
		waitFor(t, 60*time.Second, "the receiver to store a failed page", func() bool {
			req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/webhooks/crawl", bytes.NewReader(body))
			req.Header.Set(verify.FirecrawlHeader, verify.Header(leakWebhookSecret, body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		s.waitLog(t, "alert webhook POST failed; retrying")
		s.waitLog(t, "connection refused")
		s.waitLog(t, "giving up")
		if n := hookCalls.Load(); n != 1 {
			t.Errorf("the alert webhook was reached %d times, want once (then it was gone)", n)
		}
		s.waitLog(t, "crawl API refused CRAWL_API_KEY")
		if apiCalls.Load() == 0 {
			t.Error("the crawl API was never called")
		}
		var out logtest.Buffer
		err := sinkcmd.Run(t.Context(), []string{"sink", "backfill", crawl}, sinkEnv.get, &out, &out)
		if err == nil {
			t.Error("sink backfill with a refused key succeeded")
		}
		keep("sink backfill with a refused key", fmt.Sprint(err)+out.String())
		keep("receiver: error", fmt.Sprint(r.stop(t)))
		keep("receiver: logs", r.out.String())
		keep("sink: error", fmt.Sprint(s.stop(t)))
		keep("sink: logs", s.out.String())
	})
}
