package e2e_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
)

const secret = "test-secret"

// helperEnv makes the test binary run as a sink process (see TestMain), so
// that a test can kill a sink with SIGKILL.
const helperEnv = "CRAWLHOUSE_E2E_SINK_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		// Ack wait short enough for a test to see a killed sink's batch
		// come back; everything else is the sink as users run it.
		err := sinkcmd.RunWithOptions(context.Background(), []string{"sink"}, os.Getenv, os.Stdout, os.Stderr, sinkcmd.Options{AckWait: 2 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, "sink:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	clickhousetest.RunMain(m)
}

type env map[string]string

func (e env) get(k string) string { return e[k] }

// pipeline is a JetStream server, a ClickHouse database and the receiver's
// and sink's environments pointing at them.
type pipeline struct {
	natsURL string
	chAddr  string
	db      string
	conn    driver.Conn
	sinkEnv env
}

// newPipeline uses the shared ClickHouse unless chAddr is given.
func newPipeline(t *testing.T, chAddr string) *pipeline {
	t.Helper()
	p := &pipeline{natsURL: streamtest.Start(t)}
	if chAddr == "" {
		p.chAddr, p.db = clickhousetest.NewDatabase(t)
		p.conn = clickhousetest.Open(t, p.db)
	} else {
		p.chAddr, p.db = chAddr, "crawl"
	}
	p.sinkEnv = env{
		"NATS_URL":            p.natsURL,
		"CLICKHOUSE_ADDR":     p.chAddr,
		"CLICKHOUSE_DATABASE": p.db,
		"SINK_LISTEN":         "127.0.0.1:0",
		"SINK_BATCH_WAIT":     "100ms",
		"LOG_LEVEL":           "warn",
	}
	return p
}

// startReceiver runs the real receiver in process and returns its webhook URL.
func (p *pipeline) startReceiver(t *testing.T, extra env) string {
	t.Helper()
	e := env{
		"RECEIVER_LISTEN": "127.0.0.1:0",
		"WEBHOOK_SECRETS": secret,
		"NATS_URL":        p.natsURL,
		"LOG_LEVEL":       "warn",
	}
	maps.Copy(e, extra)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan receivercmd.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- receivercmd.RunWithOptions(ctx, []string{"receiver"}, e.get, io.Discard, io.Discard, receivercmd.Options{Ready: func(a receivercmd.Addrs) { ready <- a }})
	}()
	var addrs receivercmd.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("receiver exited: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("receiver did not start")
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	url := "http://" + addrs.HTTP + "/webhooks/crawl"
	// Wait until the receiver's stream is there (it is created in the
	// background): /readyz.
	waitFor(t, 2*time.Minute, "receiver ready", func() bool {
		resp, err := http.Get("http://" + addrs.HTTP + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return url
}

// inProcessSink is a sink run by the test goroutine.
type inProcessSink struct {
	addr string
	stop func()
}

func (p *pipeline) startSink(t *testing.T, extra env) *inProcessSink {
	t.Helper()
	e := maps.Clone(p.sinkEnv)
	maps.Copy(e, extra)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- sinkcmd.RunWithOptions(ctx, []string{"sink"}, e.get, io.Discard, io.Discard, sinkcmd.Options{Ready: func(a string) { ready <- a }})
	}()
	s := &inProcessSink{}
	select {
	case s.addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("sink exited: %v", err)
	}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("sink: %v", err)
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

// sinkProcess is a sink in a child process (the test binary, see TestMain).
type sinkProcess struct {
	cmd  *exec.Cmd
	logs *bytes.Buffer
}

func (p *pipeline) startSinkProcess(t *testing.T, extra env) *sinkProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	for k, v := range p.sinkEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range extra {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sp := &sinkProcess{cmd: cmd, logs: logs}
	t.Cleanup(func() { sp.kill() })
	return sp
}

// kill ends the sink with SIGKILL: no shutdown, no acks.
func (sp *sinkProcess) kill() {
	if sp.cmd.ProcessState == nil {
		_ = sp.cmd.Process.Kill()
		_ = sp.cmd.Wait()
	}
}

// deliver POSTs a body signed as the crawl API signs it and returns the
// status and body of the answer.
func deliver(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func mustDeliver(t *testing.T, url string, body []byte) string {
	t.Helper()
	code, answer := deliver(t, url, body)
	if code != 200 {
		t.Fatalf("delivery answered %d %s", code, answer)
	}
	return answer
}

func pageBody(crawl, webhook, url, markdown string) []byte {
	return fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"html":"<p>x</p>","metadata":{"title":"T %s","sourceURL":%q,"url":%q,"statusCode":200,"scrapeId":%q,"unknownKey":"kept"}}],"metadata":{"tenant":"acme"}}`,
		crawl, webhook, markdown, url, url, url, uuid.NewString())
}

func failedBody(crawl, webhook, url string) []byte {
	return fmt.Appendf(nil, `{"success":false,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"metadata":{"sourceURL":%q}}],"error":"Request failed with status code 502"}`,
		crawl, webhook, url)
}

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

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
