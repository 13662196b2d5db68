package receivercmd

// Admission before authentication, against the receiver binary run as its
// own process: unsigned clients, however slow or numerous, and however much
// of a body they announce, cannot make a signed delivery from another
// client be refused, and what they hold stays within the configured bounds.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/verify"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// receiverBinary builds cmd/receiver once per test run, as users build it.
func receiverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "crawlhouse-receiver-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "receiver")
		cmd := exec.Command("go", "build", "-o", builtBin, "../../cmd/receiver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// receiverProc is the receiver binary running as its own process; its
// logs (stdout) are kept in a file.
type receiverProc struct {
	runningReceiver
	cmd     *exec.Cmd
	logPath string
}

// startReceiverProcess runs the binary with env (and the defaults of
// startReceiver) as its whole environment, and waits until it is ready.
func startReceiverProcess(t *testing.T, env map[string]string) *receiverProc {
	t.Helper()
	// info: the "listening" line gives the address.
	full := map[string]string{"RECEIVER_LISTEN": "127.0.0.1:0", "WEBHOOK_SECRETS": testSecret, "LOG_LEVEL": "info"}
	for k, v := range env {
		full[k] = v
	}
	p := &receiverProc{logPath: filepath.Join(t.TempDir(), "receiver.log")}
	p.cmd = exec.Command(receiverBinary(t))
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range full {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		logFile.Close()
	})
	// The first line saying "listening" gives the address; every line
	// goes to the log file.
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logFile.Write(append(line, '\n'))
			var l struct{ Message, Addr string }
			if json.Unmarshal(line, &l) == nil && l.Message == "listening" {
				select {
				case addr <- l.Addr:
				default:
				}
			}
		}
	}()
	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-time.After(time.Minute):
		t.Fatalf("the receiver did not listen within a minute; log:\n%s", p.log())
	}
	p.waitReady(t)
	return p
}

func (p *receiverProc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

func (p *receiverProc) addr() string { return strings.TrimPrefix(p.URL, "http://") }

// rss is the process's resident set size in bytes, from /proc.
func (p *receiverProc) rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// outcomes reads crawlhouse_webhook_deliveries_total{outcome=o}.
func outcomeCount(t testing.TB, r *runningReceiver, o string) float64 {
	t.Helper()
	return metricValue(t, r, `crawlhouse_webhook_deliveries_total{outcome="`+o+`"}`)
}

// hold opens a connection from the loopback address src announcing a body of
// contentLength bytes without a signature and sends the first sent bytes;
// with trickle, it then sends one more byte every trickle until the
// receiver answers or the test ends. The connection's answer, if it gets
// one, goes to answered (-1: the connection ended without one).
func hold(t *testing.T, src, addr string, contentLength int64, sent int, trickle time.Duration, answered chan<- answer) {
	t.Helper()
	conn := dialFrom(t, src, addr)
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST /webhooks/crawl HTTP/1.1\r\nHost: receiver\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", contentLength)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		// The receiver may refuse the body before it is all written.
		if _, err := conn.Write(append([]byte(head), make([]byte, sent)...)); err != nil {
			return
		}
		if trickle == 0 {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(trickle):
			}
			if _, err := conn.Write([]byte{' '}); err != nil {
				return
			}
		}
	}()
	go func() {
		a := readAnswer(conn, time.Hour)
		cancel()
		answered <- a // buffered for every connection
	}()
}

// deliverSigned sends n signed deliveries from 127.0.0.2, conc at a time,
// and returns their webhook ids and every answer that was not 200.
func deliverSigned(t *testing.T, addr string, n, conc, size int) (ids []string, refused []answer) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				body, id := page(t, randomText(size))
				a := sendFrom(t, "127.0.0.2", addr, rawRequest{body: body, sig: verify.Header(testSecret, body)})
				mu.Lock()
				ids = append(ids, id)
				if a.status != 200 {
					refused = append(refused, a)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return ids, refused
}

// requireStored fails unless the events stream holds exactly the
// deliveries ids, by their Nats-Msg-Id.
func requireStored(t *testing.T, js *jetStream, ids []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.client(t).Stream(ctx, "CRAWL_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		stored[m.Header.Get("Nats-Msg-Id")] = true
	}
	for _, id := range ids {
		if !stored[id] {
			t.Errorf("delivery %s was answered 200 but is not in the stream", id)
		}
	}
	if len(stored) != len(ids) {
		t.Errorf("the stream holds %d deliveries, want the %d signed ones", len(stored), len(ids))
	}
}

// TestSlowUnsignedClientsDoNotStarveSigned: more unsigned connections than
// RECEIVER_MAX_INFLIGHT (and than the unverified pool) trickle one byte
// every two seconds from one address while another client sends signed
// deliveries: every signed delivery is answered 200 and is in the stream.
// The tricklers are given all the time they want (RECEIVER_BODY_TIMEOUT and
// RECEIVER_READ_TIMEOUT of 10m), so what is tested is the separation of
// what they may hold from what a signed delivery needs, not a timeout.
func TestSlowUnsignedClientsDoNotStarveSigned(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	const maxUnverified, perAddr, tricklers = 64, 8, 80
	r := startReceiverProcess(t, map[string]string{"NATS_URL": js.URL(),
		"RECEIVER_MAX_INFLIGHT": "16", "RECEIVER_MAX_UNVERIFIED": strconv.Itoa(maxUnverified),
		"RECEIVER_MAX_UNVERIFIED_PER_ADDR": strconv.Itoa(perAddr),
		"RECEIVER_BODY_TIMEOUT":            "10m", "RECEIVER_READ_TIMEOUT": "10m"})
	answers := make(chan answer, tricklers)
	for i := 0; i < tricklers; i++ {
		hold(t, "127.0.0.1", r.addr(), 1<<20, 1, 2*time.Second, answers)
	}
	// The address gets half the pool; the rest of its connections are
	// refused at once with 429 address_limit.
	held := maxUnverified / 2
	waitMetric(t, &r.runningReceiver, "crawlhouse_webhook_unverified", fmt.Sprint(held), func(v float64) bool { return v == float64(held) })
	for i := held; i < tricklers; i++ {
		if a := <-answers; a.status != 429 || !strings.Contains(a.body, `"error":"overloaded"`) {
			t.Fatalf("a trickler past its address's share: %d %s, want 429 overloaded", a.status, a.body)
		}
	}
	if got := outcomeCount(t, &r.runningReceiver, receiver.OutcomeAddressLimit); got != tricklers-float64(held) {
		t.Errorf("outcome address_limit counted %v, want %d", got, tricklers-held)
	}

	ids, refused := deliverSigned(t, r.addr(), 64, 8, 2<<10)
	if len(refused) > 0 {
		t.Fatalf("%d of %d signed deliveries from another client refused beside %d trickling connections, e.g. %d %s",
			len(refused), len(ids), held, refused[0].status, refused[0].body)
	}
	// The tricklers were open all along, holding their places.
	if v := metricValue(t, &r.runningReceiver, "crawlhouse_webhook_unverified"); v != float64(held) {
		t.Errorf("crawlhouse_webhook_unverified %v after the signed deliveries, want the %d tricklers still held", v, held)
	}
	requireStored(t, js, ids)
	if t.Failed() {
		t.Logf("receiver log:\n%s", r.log())
	}
}

// TestHalfSentBodiesDoNotStarveSigned: unsigned connections from one
// address announce bodies of the largest size, send half, and stall, while
// another client sends signed deliveries of 1 MiB: every signed delivery
// is answered 200 and is in the stream, and the body bytes held stay
// within the configured bounds throughout.
func TestHalfSentBodiesDoNotStarveSigned(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	const (
		maxBody       = 4 << 20
		inflightBytes = 32 << 20
		unverified    = 16 << 20
		perAddr       = 2 * (maxBody + 1)
		stalled       = 64
	)
	r := startReceiverProcess(t, map[string]string{"NATS_URL": js.URL(),
		"WEBHOOK_MAX_BODY_BYTES": strconv.Itoa(maxBody), "RECEIVER_MAX_INFLIGHT_BYTES": strconv.Itoa(inflightBytes),
		"RECEIVER_MAX_UNVERIFIED_BYTES": strconv.Itoa(unverified), "RECEIVER_MAX_UNVERIFIED_BYTES_PER_ADDR": strconv.Itoa(perAddr),
		"RECEIVER_BODY_TIMEOUT": "10m", "RECEIVER_READ_TIMEOUT": "10m"})
	baseline := r.rss(t)

	// Peaks of the gauges and of the resident memory, sampled throughout.
	var peakUnverified, peakInflight float64
	var peakRSS int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peakUnverified = max(peakUnverified, metricValue(t, &r.runningReceiver, "crawlhouse_webhook_unverified_bytes"))
			peakInflight = max(peakInflight, metricValue(t, &r.runningReceiver, "crawlhouse_webhook_inflight_bytes"))
			peakRSS = max(peakRSS, r.rss(t))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	// Each announces the largest body and sends half of it (the receiver
	// answers some at once: past the address's share).
	answers := make(chan answer, stalled)
	for i := 0; i < stalled; i++ {
		hold(t, "127.0.0.1", r.addr(), maxBody, maxBody/2, 0, answers)
	}
	// Until every connection is either held or answered, and every held
	// body has taken its whole buffer (the announced length plus one): a
	// body admitted first can still be refused when its buffer grows past
	// the address's byte share, which moves it from held to refused
	// without changing the sum.
	waitMetric(t, &r.runningReceiver, "crawlhouse_webhook_unverified", "every stalled body held with its buffer, or refused", func(v float64) bool {
		return v+outcomeCount(t, &r.runningReceiver, receiver.OutcomeAddressLimit)+outcomeCount(t, &r.runningReceiver, receiver.OutcomeOverloaded) == stalled &&
			metricValue(t, &r.runningReceiver, "crawlhouse_webhook_unverified_bytes") == v*(maxBody+1)
	})
	held := metricValue(t, &r.runningReceiver, "crawlhouse_webhook_unverified")
	if held == 0 || held == stalled {
		t.Fatalf("%v of %d half-sent bodies held: the test does not exercise the share", held, stalled)
	}

	ids, refused := deliverSigned(t, r.addr(), 24, 4, 1<<20)
	close(stop)
	<-sampled
	if len(refused) > 0 {
		t.Fatalf("%d of %d signed deliveries from another client refused beside %v half-sent bodies, e.g. %d %s",
			len(refused), len(ids), held, refused[0].status, refused[0].body)
	}
	if v := metricValue(t, &r.runningReceiver, "crawlhouse_webhook_unverified"); v != held {
		t.Errorf("crawlhouse_webhook_unverified %v after the signed deliveries, want the %v stalled bodies still held", v, held)
	}
	requireStored(t, js, ids)
	t.Logf("%v half-sent bodies held; peaks: unverified %.0f B, in flight %.0f B, RSS %d MiB over a baseline of %d MiB",
		held, peakUnverified, peakInflight, (peakRSS-baseline)>>20, baseline>>20)
	if peakUnverified > unverified {
		t.Errorf("unverified bytes peaked at %.0f, above RECEIVER_MAX_UNVERIFIED_BYTES %d", peakUnverified, unverified)
	}
	if peakInflight > inflightBytes {
		t.Errorf("body bytes peaked at %.0f, above RECEIVER_MAX_INFLIGHT_BYTES %d", peakInflight, inflightBytes)
	}
	// Resident memory is logged, not asserted: refused bodies leave
	// garbage the collector (target 200, runtime.go) and the scavenger
	// return on their own schedule, so RSS peaks say little about what is
	// held; the gauges above are what the bounds promise.
	if t.Failed() {
		t.Logf("receiver log:\n%s", r.log())
	}
}

// TestRefusalsLoggedAtABoundedRate: a flood of unsigned deliveries is
// counted whole in crawlhouse_webhook_deliveries_total, but logged at most
// receiver.RefusalBurst lines plus receiver.RefusalRate a second, and a line written after
// suppressed ones says how many.
func TestRefusalsLoggedAtABoundedRate(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiverProcess(t, map[string]string{"NATS_URL": js.URL()})
	const flood = 400
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < flood/8; i++ {
				body, _ := page(t, "forged")
				if a := send(t, r.addr(), rawRequest{body: body, sig: verify.Header("wrong", body)}); a.status != 401 {
					t.Errorf("forged delivery: %d %s", a.status, a.body)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if got := outcomeCount(t, &r.runningReceiver, receiver.OutcomeInvalidSignature); got != flood {
		t.Errorf("outcome invalid_signature counted %v, want %d", got, flood)
	}
	var lines int
	for _, line := range strings.Split(r.log(), "\n") {
		if strings.Contains(line, "delivery refused before authentication") {
			lines++
		}
	}
	// The bound follows from the bucket and the measured duration of the
	// flood: it asserts the logging rate, not how long anything took.
	allowed := receiver.RefusalBurst + int(elapsed.Seconds()*receiver.RefusalRate) + 1
	t.Logf("%d forged deliveries in %s: %d lines logged (bound %d)", flood, elapsed, lines, allowed)
	if lines == 0 || lines > allowed {
		t.Errorf("%d refusal lines logged for %d refusals, want between 1 and %d", lines, flood, allowed)
	}
}
