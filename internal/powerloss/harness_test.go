package powerloss_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	secret     = "powerloss-test-secret"
	streamName = "CRAWL_EVENTS"
	subjects   = "crawl.events."
)

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// buildBinaries builds the receiver and the sink as users run them.
func buildBinaries(t testing.TB) (receiver, sink string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator), "./cmd/receiver", "./cmd/sink")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "receiver"), filepath.Join(dir, "sink")
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// proc is a crawlhouse binary run as its own process, configured by
// environment only.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

// startProc runs bin with env (and only PATH, HOME and TMPDIR of ours) and
// waits until health/readyz answers 200.
func startProc(t testing.TB, name, bin, logDir, health string, env map[string]string) *proc {
	t.Helper()
	p := &proc{name: name, log: filepath.Join(logDir, name+".log"), done: make(chan struct{})}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin)
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			p.cmd.Env = append(p.cmd.Env, k+"="+v)
		}
	}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := client.Get(health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before it was ready:\n%s", name, p.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			t.Fatalf("%s not ready at %s/readyz:\n%s", name, health, p.tail())
		}
	}
}

// kill ends the process with SIGKILL, as a power loss does, and waits for
// it to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop shuts the process down gracefully (SIGTERM), killing it if it has
// not exited after a minute.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.kill()
	}
}

// tail is the end of the process's log, for failure messages.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// layout is how the receiver keeps its promise: a server that syncs
// always, or a lazy one behind the write-ahead log.
type layout struct {
	syncAlways bool // NATS_SYNC_ALWAYS
	wal        bool // RECEIVER_WAL_DIR set, in the same store as the stream
	// syncEvery is NATS_SYNC_INTERVAL; zero: syncInterval.
	syncEvery time.Duration
}

func (l layout) String() string {
	every := syncInterval
	if l.syncEvery > 0 {
		every = l.syncEvery
	}
	if l.syncAlways {
		return fmt.Sprintf("NATS_SYNC_ALWAYS=true, write-ahead log %v", l.wal)
	}
	return fmt.Sprintf("NATS_SYNC_ALWAYS=false, NATS_SYNC_INTERVAL=%s, write-ahead log %v", every, l.wal)
}

// syncInterval is the lazy embedded server's NATS_SYNC_INTERVAL in these
// tests (the default).
const syncInterval = 100 * time.Millisecond

// receiverEnv is the receiver's configuration with its embedded JetStream
// in root/nats and, with the log on, the write-ahead log in root/wal: both
// on the same (lazyfs) filesystem, as both are on one disk in production.
func receiverEnv(root string, listen, natsPort int, l layout) map[string]string {
	env := map[string]string{
		"RECEIVER_LISTEN":    fmt.Sprintf("127.0.0.1:%d", listen),
		"WEBHOOK_SECRETS":    secret,
		"NATS_EMBEDDED":      "true",
		"NATS_URL":           fmt.Sprintf("nats://127.0.0.1:%d", natsPort),
		"NATS_STORE_DIR":     filepath.Join(root, "nats"),
		"NATS_SYNC_ALWAYS":   fmt.Sprint(l.syncAlways),
		"NATS_SYNC_INTERVAL": syncInterval.String(),
	}
	if l.syncEvery > 0 {
		env["NATS_SYNC_INTERVAL"] = l.syncEvery.String()
	}
	if l.wal {
		env["RECEIVER_WAL_DIR"] = filepath.Join(root, "wal")
	}
	return env
}

// delivery is one signed crawl.page webhook.
type delivery struct {
	webhookID string
	body      []byte
}

// makeDeliveries builds n crawl.page deliveries of one crawl from the
// fixture, each with its own webhookId (UUIDv4) and page URL.
func makeDeliveries(t testing.TB, crawlID, tag string, n int) []delivery {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "testdata", "fixtures", "crawl-page.json"))
	if err != nil {
		t.Fatal(err)
	}
	// A page of a few kilobytes, like a real one.
	filler := strings.Repeat("Power loss keeps only what was fsynced. ", 80)
	out := make([]delivery, n)
	for i := range out {
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		id := uuid.NewString()
		page := doc["data"].([]any)[0].(map[string]any)
		meta := page["metadata"].(map[string]any)
		u := url.URL{Scheme: "https", Host: "example.com", Path: fmt.Sprintf("/powerloss/%s/%d", tag, i)}
		meta["url"], meta["sourceURL"] = u.String(), u.String()
		page["markdown"] = fmt.Sprintf("# Page %s %d\n\n%s", tag, i, filler)
		doc["id"], doc["webhookId"] = crawlID, id
		body, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = delivery{webhookID: id, body: body}
	}
	return out
}

func sign(body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// sent is what the senders saw.
type sent struct {
	acked    []string       // webhookIds answered 2xx
	statuses map[string]int // status line or error kind -> count
}

// sendAndCrash posts the deliveries from concurrency senders to endpoint,
// and calls crash once killAfter deliveries have been answered 2xx (never
// when killAfter < 0); no delivery is started after that. It returns when
// every sender is done.
func sendAndCrash(endpoint string, ds []delivery, concurrency, killAfter int, crash func()) sent {
	client := &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency},
	}
	defer client.CloseIdleConnections()
	var (
		mu      sync.Mutex
		res     = sent{statuses: map[string]int{}}
		crashed = make(chan struct{})
		once    sync.Once
		wg      sync.WaitGroup
	)
	next := make(chan delivery)
	go func() {
		defer close(next)
		for _, d := range ds {
			if isClosed(crashed) {
				return
			}
			select {
			case next <- d:
			case <-crashed:
				return
			}
		}
	}()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range next {
				// A 429 or 5xx is tried again, as the crawl API's sender
				// does: overload on a busy machine must not keep the crash
				// from coming.
				for attempt := 1; ; attempt++ {
					status, ok := post(client, endpoint, d.body)
					mu.Lock()
					res.statuses[status]++
					if ok {
						res.acked = append(res.acked, d.webhookID)
					}
					reached := ok && killAfter >= 0 && len(res.acked) == killAfter
					mu.Unlock()
					if reached {
						once.Do(func() {
							crash()
							close(crashed)
						})
					}
					retry := status == "429 Too Many Requests" || strings.HasPrefix(status, "5")
					if ok || !retry || attempt == 5 || isClosed(crashed) {
						break
					}
					time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return res
}

// post sends one signed delivery and returns its status line ("error" when
// no response came) and whether it was a 2xx.
func post(client *http.Client, endpoint string, body []byte) (string, bool) {
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return "error", false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-Signature", sign(body))
	resp, err := client.Do(req)
	if err != nil {
		return "error", false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.Status, resp.StatusCode/100 == 2
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// streamIDs reads every message of the stream and returns their
// Nats-Msg-Id headers (the webhookIds).
func streamIDs(t testing.TB, natsURL string) map[string]bool {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatalf("connect %s: %v", natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, streamName)
	if err != nil {
		t.Fatalf("stream %s: %v", streamName, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	if info.State.Msgs == 0 {
		return ids
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		if !strings.HasPrefix(m.Subject, subjects) {
			t.Errorf("message %d on subject %q, want the prefix %q", seq, m.Subject, subjects)
		}
		ids[m.Header.Get("Nats-Msg-Id")] = true
	}
	return ids
}

// missingFrom lists the ids not in have, sorted.
func missingFrom(ids []string, have map[string]bool) []string {
	var out []string
	for _, id := range ids {
		if !have[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// first is at most n of s, for messages.
func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

// chEnv is the ClickHouse part of the sink's environment, with the
// credentials clickhousetest connects with (never a guessed password).
func chEnv(addr, database string) map[string]string {
	env := map[string]string{"CLICKHOUSE_ADDR": addr, "CLICKHOUSE_DATABASE": database}
	for _, k := range []string{"CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}
