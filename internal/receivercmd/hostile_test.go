package receivercmd

// Hostile input: the receiver answers every request, however
// malformed, slow or numerous, with a clear status from a small set, never
// a 5xx other than 503, and keeps answering well-formed deliveries.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// hostileStatuses are the only answers a request may get. 503 is the only
// 5xx: JetStream did not confirm in time.
var hostileStatuses = map[int]bool{200: true, 400: true, 401: true, 408: true, 413: true, 429: true, 431: true, 503: true}

// rawRequest is one HTTP/1.1 request written byte for byte, so that tests
// can send what no well-behaved client would.
type rawRequest struct {
	body []byte
	// sig is the signature header's value; none when empty.
	sig string
	// header is one extra header, repeated repeat times (0: none).
	headerName, headerValue string
	repeat                  int
	// chunked sends the body without Content-Length.
	chunked bool
}

func (q rawRequest) bytes(path string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: receiver\r\nContent-Type: application/json\r\nConnection: close\r\n", path)
	if q.sig != "" {
		fmt.Fprintf(&b, "%s: %s\r\n", verify.DefaultHeader, q.sig)
	}
	for i := 0; i < q.repeat; i++ {
		fmt.Fprintf(&b, "%s: %s\r\n", q.headerName, q.headerValue)
	}
	if q.chunked {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if len(q.body) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(q.body), q.body)
		}
		b.WriteString("0\r\n\r\n")
		return b.Bytes()
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(q.body))
	b.Write(q.body)
	return b.Bytes()
}

// send writes q on a fresh connection and reads the answer. The write runs
// beside the read: the receiver may answer (413, 431) before it has read
// everything, and then closes.
func send(t testing.TB, addr string, q rawRequest) answer {
	t.Helper()
	return sendFrom(t, "", addr, q)
}

// sendFrom is send from the loopback source address src ("127.0.0.2"), so
// that the receiver sees another client; "" lets the system choose.
func sendFrom(t testing.TB, src, addr string, q rawRequest) answer {
	t.Helper()
	conn := dialFrom(t, src, addr)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	go func() { _, _ = conn.Write(q.bytes("/webhooks/crawl")) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, strings.TrimSpace(string(b))}
}

// dialFrom connects to addr from the source address src ("" lets the
// system choose). Every 127.0.0.0/8 address is the loopback interface's on
// Linux, so a test can be several clients.
func dialFrom(t testing.TB, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %q: %v", src, err)
	}
	return conn
}

// checkHostile fails unless a is one of the answers a request may get.
func checkHostile(t testing.TB, what string, a answer) {
	t.Helper()
	if !hostileStatuses[a.status] {
		t.Fatalf("%s: answered %d %s", what, a.status, a.body)
	}
	if a.status == 200 && !strings.Contains(a.body, `"status":"accepted"`) && !strings.Contains(a.body, `"status":"duplicate"`) {
		t.Fatalf("%s: 200 with body %s", what, a.body)
	}
}

// headerSafe keeps fuzzed header names to tokens that the handler sees.
// net/http itself answers a few framing headers before any handler runs
// (501 for an unknown Transfer-Encoding, 417 for an unknown Expect, 400 for
// a bad Host or Content-Length); those are its answers, not the receiver's.
func headerSafe(name, value string) (string, string) {
	ok := name != ""
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			ok = false
		}
	}
	switch strings.ToLower(name) {
	case "transfer-encoding", "content-length", "host", "expect", "connection", "te", "upgrade", "trailer":
		ok = false
	}
	if !ok {
		name = "X-Fuzz"
	}
	value = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == 0 {
			return ' '
		}
		return r
	}, value)
	return name, value
}

// hostileEnv is a receiver for hostile input: small body limit, quiet logs
// (a fuzz run makes thousands of warnings).
func hostileEnv(natsURL string) map[string]string {
	return map[string]string{"NATS_URL": natsURL, "WEBHOOK_MAX_BODY_BYTES": "2097152", "LOG_LEVEL": "error"}
}

// FuzzHandler posts fuzzed bodies with a correct, a fuzzed or no signature
// and a fuzzed header, repeated. The seed corpus (the fixtures, and a few
// hand-made cases) runs in every `go test`; `go test -fuzz FuzzHandler`
// explores further.
func FuzzHandler(f *testing.F) {
	for _, name := range []string{"crawl-page.json", "crawl-page-failed.json", "crawl-completed.json"} {
		body, sig := fixture(f, name)
		f.Add(body, uint8(0), "", "X-Request-Id", "abc", uint16(1), false)
		f.Add(body, uint8(2), sig, "User-Agent", "fuzz", uint16(0), true)
		f.Add(body[:len(body)/2], uint8(0), "", "X-Rep", strings.Repeat("a", 64), uint16(2000), false)
	}
	f.Add([]byte(`{"type":"crawl.page","data":[[[[`), uint8(1), "", "", "", uint16(0), false)
	f.Add([]byte("{\"type\":\"\xff\"}"), uint8(0), "", "", "", uint16(0), false)
	f.Add([]byte(`{}`), uint8(2), "sha256=zz", "Content-Type", "text/plain", uint16(3), false)
	f.Add([]byte(nil), uint8(2), "sha256="+strings.Repeat("0", 64), "", "", uint16(0), true)

	js := startJetStream(f, false)
	r := startReceiver(f, hostileEnv(js.URL()))
	addr := strings.TrimPrefix(r.URL, "http://")
	f.Fuzz(func(t *testing.T, body []byte, sigMode uint8, sig, hName, hValue string, repeat uint16, chunked bool) {
		q := rawRequest{body: body, chunked: chunked, repeat: int(repeat % 4096)}
		switch sigMode % 3 {
		case 0: // right: reaches validation and JetStream
			q.sig = verify.Header(testSecret, body)
		case 1: // none
		case 2:
			_, q.sig = headerSafe("X", sig)
		}
		q.headerName, q.headerValue = headerSafe(hName, hValue)
		checkHostile(t, "fuzzed request", send(t, addr, q))
	})
}

// mutate returns a random mutation of body: flipped, deleted, inserted or
// duplicated bytes, a truncation, deep nesting or invalid UTF-8.
func mutate(rng *rand.Rand, body []byte) []byte {
	b := append([]byte(nil), body...)
	for n := 1 + rng.Intn(4); n > 0; n-- {
		if len(b) == 0 {
			b = append(b, '{')
		}
		i := rng.Intn(len(b))
		switch rng.Intn(8) {
		case 0:
			b[i] ^= byte(1 << rng.Intn(8))
		case 1:
			j := min(len(b), i+rng.Intn(16)+1)
			b = append(b[:i], b[j:]...)
		case 2:
			ins := make([]byte, rng.Intn(8)+1)
			rng.Read(ins)
			b = append(b[:i], append(ins, b[i:]...)...)
		case 3:
			j := min(len(b), i+rng.Intn(64)+1)
			b = append(b[:j], append(append([]byte(nil), b[i:j]...), b[j:]...)...)
		case 4:
			b = b[:i]
		case 5:
			b = append(b[:i], append(bytes.Repeat([]byte{"[{"[rng.Intn(2)]}, rng.Intn(20000)), b[i:]...)...)
		case 6:
			b[i] = []byte{0xff, 0xc0, 0xed, 0x80}[rng.Intn(4)]
		case 7:
			tokens := []string{`null`, `1e999`, `"`, `\u0000`, `\ud800`, `,`, `}`, `]`, `true`, `-`, `0.`, `"webhookId":`}
			tok := tokens[rng.Intn(len(tokens))]
			b = append(b[:i], append([]byte(tok), b[i:]...)...)
		}
	}
	return b
}

// TestHostileMutations sends a few thousand random mutations of the
// fixtures (mostly correctly signed, so they reach validation and
// JetStream) and checks every answer, then that goroutines and heap come
// back to where they were.
func TestHostileMutations(t *testing.T) {
	js := startJetStream(t, false)
	r := startReceiver(t, hostileEnv(js.URL()))
	addr := strings.TrimPrefix(r.URL, "http://")
	var bodies [][]byte
	for _, name := range []string{"crawl-page.json", "crawl-page-failed.json", "crawl-completed.json"} {
		b, _ := fixture(t, name)
		bodies = append(bodies, b)
	}
	run := func(seed int64, n int) map[int]int {
		rng := rand.New(rand.NewSource(seed))
		reqs := make([]rawRequest, n)
		for i := range reqs {
			q := rawRequest{body: mutate(rng, bodies[rng.Intn(len(bodies))])}
			switch p := rng.Intn(10); {
			case p < 8:
				q.sig = verify.Header(testSecret, q.body)
			case p == 8:
				q.sig = "sha256=" + strings.Repeat("ab", rng.Intn(40))
			}
			if rng.Intn(10) == 0 {
				q.headerName, q.headerValue, q.repeat = "X-Rep", strings.Repeat("v", rng.Intn(200)), rng.Intn(1000)
			}
			q.chunked = rng.Intn(4) == 0
			reqs[i] = q
		}
		var mu sync.Mutex
		counts := map[int]int{}
		var wg sync.WaitGroup
		next := make(chan rawRequest)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for q := range next {
					a := send(t, addr, q)
					checkHostile(t, "mutation", a)
					mu.Lock()
					counts[a.status]++
					mu.Unlock()
				}
			}()
		}
		for _, q := range reqs {
			next <- q
		}
		close(next)
		wg.Wait()
		return counts
	}

	run(1, 200) // warm up: connections, pools, the stream
	goroutines, heap := settle(t, 0)
	counts := run(2, 3000)
	t.Logf("answers to 3000 mutations: %v", counts)
	if counts[400] == 0 || counts[200] == 0 {
		t.Errorf("the mutations did not reach both validation and JetStream: %v", counts)
	}
	settle(t, goroutines+10)
	if _, after := settle(t, 0); after > heap+32<<20 {
		t.Errorf("heap grew from %d to %d bytes over the run", heap, after)
	}
}

// settle waits until at most maxGoroutines goroutines run (0: no wait),
// then returns the goroutine count and the live heap after a GC.
func settle(t *testing.T, maxGoroutines int) (int, uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for maxGoroutines > 0 && runtime.NumGoroutine() > maxGoroutines {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), maxGoroutines, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapAlloc
}

// TestHostileLimits: each limit has a clear answer.
func TestHostileLimits(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, hostileEnv(js.URL()))
	addr := strings.TrimPrefix(r.URL, "http://")

	t.Run("deep nesting", func(t *testing.T) {
		head, _ := page(t, "x")
		i := bytes.Index(head, []byte(`"data":`)) + len(`"data":`)
		body := append(append(append([]byte(nil), head[:i]...), bytes.Repeat([]byte("["), 1_000_000)...), '}')
		a := send(t, addr, rawRequest{body: body, sig: verify.Header(testSecret, body)})
		if a.status != 400 || !strings.Contains(a.body, `"error":"invalid_payload"`) {
			t.Fatalf("1e6 '[': %d %s", a.status, a.body)
		}
	})
	t.Run("too large", func(t *testing.T) {
		body := bytes.Repeat([]byte("a"), 3<<20)
		for _, chunked := range []bool{false, true} {
			a := send(t, addr, rawRequest{body: body, sig: verify.Header(testSecret, body), chunked: chunked})
			if a.status != 413 || !strings.Contains(a.body, `"error":"payload_too_large"`) {
				t.Errorf("3 MiB (chunked=%v): %d %s", chunked, a.status, a.body)
			}
		}
	})
	t.Run("huge header", func(t *testing.T) {
		body, sig := fixture(t, "crawl-page.json")
		for _, q := range []rawRequest{
			{body: body, sig: sig, headerName: "X-Huge", headerValue: strings.Repeat("h", 200<<10), repeat: 1},
			{body: body, sig: sig, headerName: "X-Rep", headerValue: "v", repeat: 20000},
		} {
			if a := send(t, addr, q); a.status != 431 {
				t.Errorf("%d × %d-byte header: %d %s", q.repeat, len(q.headerValue), a.status, a.body)
			}
		}
	})
	t.Run("invalid UTF-8", func(t *testing.T) {
		body, _ := page(t, "ok \xff\xfe not UTF-8")
		body = bytes.ReplaceAll(body, []byte(`\ufffd`), []byte("\xff")) // json.Marshal replaced it
		a := send(t, addr, rawRequest{body: body, sig: verify.Header(testSecret, body)})
		if a.status != 400 || !strings.Contains(a.body, "UTF-8") {
			t.Fatalf("invalid UTF-8: %d %s", a.status, a.body)
		}
	})
	t.Run("truncated body", func(t *testing.T) {
		body, sig := fixture(t, "crawl-page.json")
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		raw := rawRequest{body: body, sig: sig}.bytes("/webhooks/crawl")
		_, _ = conn.Write(raw[:len(raw)-100])
		_ = conn.(*net.TCPConn).CloseWrite()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("body cut short: %d", resp.StatusCode)
		}
	})
	metrics := do(t, mustRequest(t, "GET", r.URL+"/metrics")).body
	if !strings.Contains(metrics, `crawlhouse_webhook_deliveries_total{outcome="error"} 0`) {
		t.Error("a hostile request was counted as an internal error")
	}
}

// TestSlowClients: a body that never finishes is answered 408 after
// RECEIVER_READ_TIMEOUT, and holds none of the RECEIVER_MAX_INFLIGHT slots
// meanwhile (they are taken only once a signature verified); a body that
// keeps arriving, but slower than RECEIVER_BODY_MIN_RATE, is answered 408
// once its RECEIVER_BODY_TIMEOUT is spent, long before RECEIVER_READ_TIMEOUT;
// one above the rate is taken, however long past RECEIVER_BODY_TIMEOUT.
func TestSlowClients(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	t.Run("stalled", func(t *testing.T) {
		t.Parallel()
		r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "RECEIVER_READ_TIMEOUT": "1s", "RECEIVER_MAX_INFLIGHT": "2"})
		addr := strings.TrimPrefix(r.URL, "http://")
		answers := make(chan answer, 2)
		for i := 0; i < 2; i++ {
			body, _ := page(t, "slow")
			raw := rawRequest{body: body, sig: verify.Header(testSecret, body)}.bytes("/webhooks/crawl")
			conn := dialFrom(t, "", addr)
			defer conn.Close()
			_, _ = conn.Write(raw[:len(raw)-len(body)+10]) // headers and 10 bytes, then nothing
			go func() { answers <- readAnswer(conn, time.Minute) }()
		}
		waitUnverified(t, r, 2)
		body, _ := page(t, "meanwhile")
		if a := r.deliver(t, body); a.status != 200 {
			t.Fatalf("with two slow clients and two in-flight slots: %d %s, want 200", a.status, a.body)
		}
		for i := 0; i < 2; i++ {
			a := <-answers
			if a.status != 408 || !strings.HasPrefix(a.body, `{"error":"timeout","message":`) {
				t.Fatalf("slow client: %d %s, want 408 timeout", a.status, a.body)
			}
		}
		metrics := do(t, mustRequest(t, "GET", r.URL+"/metrics")).body
		if !strings.Contains(metrics, `crawlhouse_webhook_deliveries_total{outcome="timeout"} 2`) {
			t.Error("the 408s are not counted as outcome=timeout")
		}
	})
	t.Run("below the minimum rate", func(t *testing.T) {
		// A byte every 50 ms, 20 bytes a second: a read timeout between
		// reads (nginx's client_body_timeout) would never fire, and the
		// whole body would take about an hour.
		t.Parallel()
		if a := sendPaced(t, js.URL(), 64<<10, 1, 50*time.Millisecond); a.status != 408 {
			t.Fatalf("a body trickling below RECEIVER_BODY_MIN_RATE: %d %s, want 408", a.status, a.body)
		}
	})
	t.Run("above the minimum rate", func(t *testing.T) {
		// 2 KiB every 250 ms, eight times RECEIVER_BODY_MIN_RATE (room for
		// a busy machine's late timers): the body takes about 4 s of the
		// 1 s RECEIVER_BODY_TIMEOUT plus the 32 s its bytes earn. The
		// deadline must keep moving as they arrive, not stay where the
		// first bytes put it (2 s from the start).
		t.Parallel()
		if a := sendPaced(t, js.URL(), 32<<10, 2<<10, 250*time.Millisecond); a.status != 200 {
			t.Fatalf("a body arriving at eight times RECEIVER_BODY_MIN_RATE: %d %s, want 200", a.status, a.body)
		}
	})
}

// sendPaced sends a signed delivery of about size bytes of text to a
// receiver on the JetStream at natsURL whose bodies get 1 s
// (RECEIVER_BODY_TIMEOUT) plus one for every 1 KiB that arrived
// (RECEIVER_BODY_MIN_RATE): its headers at once, then its body chunk bytes
// at a time, one every pause. It returns the answer.
func sendPaced(t *testing.T, natsURL string, size, chunk int, pause time.Duration) answer {
	t.Helper()
	r := startReceiver(t, map[string]string{"NATS_URL": natsURL, "RECEIVER_READ_TIMEOUT": "10m",
		"RECEIVER_BODY_TIMEOUT": "1s", "RECEIVER_BODY_MIN_RATE": "1024"})
	conn := dialFrom(t, "", strings.TrimPrefix(r.URL, "http://"))
	defer conn.Close()
	body, _ := page(t, randomText(size))
	raw := rawRequest{body: body, sig: verify.Header(testSecret, body)}.bytes("/webhooks/crawl")
	head := len(raw) - len(body)
	if _, err := conn.Write(raw[:head]); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := head; i < len(raw); i += chunk {
			select {
			case <-stop:
				return
			case <-time.After(pause):
			}
			if _, err := conn.Write(raw[i:min(i+chunk, len(raw))]); err != nil {
				return
			}
		}
	}()
	return readAnswer(conn, 5*time.Minute)
}

// readAnswer reads one HTTP answer from conn, waiting at most wait; status
// -1 when none came.
func readAnswer(conn net.Conn, wait time.Duration) answer {
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return answer{status: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, strings.TrimSpace(string(b))}
}

// TestManyConnections holds 10 000 concurrent connections to one receiver
// (as many as the open-file limit allows, if fewer): half idle, half
// stalled inside their request line (slowloris). The client ends live in a
// child process (this test binary, see connectionFlood), so that each
// process needs one descriptor per connection. While they are open, a
// well-formed delivery on a fresh connection gets 200 within 2 s. Then all
// of them send a delivery at once, and each gets a clear answer: 200, or
// 429 beyond RECEIVER_MAX_INFLIGHT; a fresh delivery meanwhile is still
// answered within 2 s (429 is a clear answer too: the sender retries).
func TestManyConnections(t *testing.T) {
	limit := raiseFileLimit(t)
	n := min(10000, limit-1000)
	if n < 1000 {
		t.Fatalf("open-file limit %d allows only %d connections", limit, n)
	}
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "LOG_LEVEL": "error"})

	cmd := exec.Command(os.Args[0], "-test.run=^TestConnectionFloodChild$", "-test.v")
	cmd.Env = append(os.Environ(), "CRAWLHOUSE_FLOOD_ADDR="+strings.TrimPrefix(r.URL, "http://"), "CRAWLHOUSE_FLOOD_N="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	expect := func(prefix string) string {
		t.Helper()
		for lines.Scan() {
			if line := lines.Text(); strings.HasPrefix(line, prefix) {
				return strings.TrimPrefix(line, prefix)
			}
		}
		t.Fatalf("the flood process ended before %q: %v", prefix, lines.Err())
		return ""
	}
	t.Logf("open-file limit %d: %d connections open", limit, n)
	expect("flood: dialed")

	// fresh sends one new signed delivery. During the burst any defined
	// answer will do (200, or 429/503 that a sender retries); before and
	// after it the delivery must be stored, retried as a sender would while
	// the receiver still digests the burst on a busy machine.
	fresh := func(what string, duringBurst bool) {
		t.Helper()
		body, _ := page(t, what)
		client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			req, _ := http.NewRequest(http.MethodPost, r.URL+"/webhooks/crawl", bytes.NewReader(body))
			req.Header.Set(verify.DefaultHeader, verify.Header(testSecret, body))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: fresh delivery: %v", what, err)
			}
			resp.Body.Close()
			code := resp.StatusCode
			retryable := code == 429 || code == 503
			switch {
			case code == 200 || duringBurst && retryable:
				t.Logf("%s: fresh delivery answered %d", what, code)
				return
			case retryable && time.Now().Before(deadline):
				time.Sleep(100 * time.Millisecond)
			default:
				t.Fatalf("%s: fresh delivery answered %d", what, code)
			}
		}
	}
	fresh("with the connections open", false)

	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	expect("flood: sending")
	fresh("during the burst", true)
	counts := map[int]int{}
	if err := json.Unmarshal([]byte(expect("flood: answers ")), &counts); err != nil {
		t.Fatal(err)
	}
	t.Logf("answers of %d concurrent deliveries: %v", n, counts)
	// 503 is what the receiver answers when JetStream does not confirm in
	// time (a loaded machine): the sender retries it, like 429.
	if counts[200]+counts[429]+counts[503] != n || counts[200] == 0 {
		t.Errorf("want every connection answered 200, 429 or 503: %v (-1: write failed, -2: no answer)", counts)
	}
	fresh("after the burst", false)
	// Every delivery answered 200 is in the stream (a 503 may be too: its
	// PubAck can come after the answer), besides the fresh ones.
	if stored := streamMsgs(t, js.client(t)); stored < uint64(counts[200]) {
		t.Errorf("stream holds %d messages, fewer than the %d deliveries answered 200", stored, counts[200])
	}
}

// raiseFileLimit raises the soft open-file limit to the hard one and
// returns it.
func raiseFileLimit(t *testing.T) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = lim.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return int(lim.Cur)
}

// TestConnectionFloodChild is the client side of TestManyConnections, run
// in a child process; on its own (without CRAWLHOUSE_FLOOD_ADDR) it has
// nothing to do and passes.
func TestConnectionFloodChild(t *testing.T) {
	addr := os.Getenv("CRAWLHOUSE_FLOOD_ADDR")
	if addr == "" {
		return
	}
	n, _ := strconv.Atoi(os.Getenv("CRAWLHOUSE_FLOOD_N"))
	raiseFileLimit(t)
	// The parent's stdin closing (it died) ends the child.
	goSignal := make(chan struct{})
	go func() {
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil || line != "go\n" {
			os.Exit(2)
		}
		close(goSignal)
	}()
	fmt.Println(connectionFlood(t, addr, n, goSignal))
}

// connectionFlood dials n connections to addr, half of them stalled inside
// their request line, prints "flood: dialed", waits for start, prints
// "flood: sending", sends one delivery on each at once and returns
// "flood: answers {status:count}".
func connectionFlood(t *testing.T, addr string, n int, start <-chan struct{}) string {
	conns := make([]net.Conn, n)
	raws := make([][]byte, n)
	var wg sync.WaitGroup
	jobs := make(chan int)
	var dialErr atomic.Value
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				body, _ := page(t, "c"+strconv.Itoa(i))
				raws[i] = rawRequest{body: body, sig: verify.Header(testSecret, body)}.bytes("/webhooks/crawl")
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					dialErr.Store(err)
					continue
				}
				conns[i] = c
				if i%2 == 1 {
					_, _ = c.Write(raws[i][:20]) // stalled inside the request line
				}
			}
		}()
	}
	for i := range conns {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err, _ := dialErr.Load().(error); err != nil {
		t.Fatalf("dial: %v", err)
	}
	fmt.Println("flood: dialed")
	select {
	case <-start:
	case <-time.After(30 * time.Second):
		t.Fatal("no go from the parent in 30s")
	}

	fmt.Println("flood: sending")
	statuses := make([]int, n)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			rest := raws[i]
			if i%2 == 1 {
				rest = rest[20:]
			}
			if _, err := c.Write(rest); err != nil {
				statuses[i] = -1
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				statuses[i] = -2
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	b, _ := json.Marshal(counts)
	return "flood: answers " + string(b)
}

// TestSecretsNeverLogged runs a receiver at debug level through every
// answer it has (200, duplicate, 400, 401, 404, 405, 408, 413, 429, 431,
// 503 with JetStream stopped) and through a refused start, and greps its
// logs and every answer for the secrets: the HMAC secrets and the NATS
// password and token.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	secrets := []string{"whsec-alpha-7f3a9c0d", "whsec-beta-2b8e1d4f", "natspass-5d6e7f80", "natstoken-91a2b3c4"}
	// The embedded test server has no authentication and ignores the
	// credentials; the receiver holds them all the same.
	for name, auth := range map[string]map[string]string{
		"password": {"NATS_USER": "crawl", "NATS_PASSWORD": secrets[2]},
		"token":    {"NATS_TOKEN": secrets[3]},
		// NATS_URL with the password in its userinfo (filled in below).
		"url userinfo": {"NATS_URL": "userinfo"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			secretsNeverLogged(t, secrets, auth)
		})
	}
}

func secretsNeverLogged(t *testing.T, secrets []string, auth map[string]string) {
	js := startJetStream(t, false)
	env := map[string]string{
		"NATS_URL": js.URL(), "LOG_LEVEL": "debug",
		"WEBHOOK_SECRETS":       secrets[0] + "," + secrets[1],
		"RECEIVER_READ_TIMEOUT": "1s", "RECEIVER_MAX_UNVERIFIED": "1", "WEBHOOK_MAX_BODY_BYTES": "65536",
		"RECEIVER_PUBLISH_TIMEOUT": "500ms",
	}
	for k, v := range auth {
		env[k] = v
	}
	if env["NATS_URL"] == "userinfo" {
		env["NATS_URL"] = strings.Replace(js.URL(), "nats://", "nats://crawl:"+secrets[2]+"@", 1)
	}
	r := startReceiver(t, env)
	addr := strings.TrimPrefix(r.URL, "http://")
	var answers []string
	seen := map[int]bool{}
	keep := func(a answer) {
		seen[a.status] = true
		answers = append(answers, a.body, fmt.Sprint(a.header))
	}
	sign := func(b []byte) string { return verify.Header(secrets[1], b) }

	body, _ := page(t, "ok")
	keep(send(t, addr, rawRequest{body: body, sig: sign(body)}))                             // 200
	keep(send(t, addr, rawRequest{body: body, sig: sign(body)}))                             // 200 duplicate
	keep(send(t, addr, rawRequest{body: body}))                                              // 401 missing
	keep(send(t, addr, rawRequest{body: body, sig: "sha256=" + secrets[0]}))                 // 401 malformed, echoing a secret
	keep(send(t, addr, rawRequest{body: body, sig: verify.Header("wrong", body)}))           // 401 mismatch
	keep(send(t, addr, rawRequest{body: []byte(secrets[0]), sig: sign([]byte(secrets[0]))})) // 400, a body made of a secret
	// A crawl event (its envelope is checked) refused: 400.
	keep(send(t, addr, rawRequest{body: []byte(`{"type":"crawl.` + secrets[2] + `"}`), sig: sign([]byte(`{"type":"crawl.` + secrets[2] + `"}`))}))
	big := bytes.Repeat([]byte("a"), 70000)
	keep(send(t, addr, rawRequest{body: big, sig: sign(big)}))                                                               // 413
	keep(send(t, addr, rawRequest{body: body, sig: sign(body), headerName: "X-Rep", headerValue: secrets[3], repeat: 5000})) // 431
	keep(do(t, mustRequest(t, "GET", r.URL+"/nope")))                                                                        // 404
	keep(do(t, mustRequest(t, "GET", r.URL+"/webhooks/crawl")))                                                              // 405
	// A slow body from a client not trusted yet holds the only place of
	// RECEIVER_MAX_UNVERIFIED: another such evicts it (429), and a slow
	// body alone gets 408.
	slowBody, _ := page(t, "slow")
	raw := rawRequest{body: slowBody, sig: sign(slowBody)}.bytes("/webhooks/crawl")
	slowAnswer := func(conn net.Conn) {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
			b, _ := io.ReadAll(resp.Body)
			keep(answer{resp.StatusCode, resp.Header, string(b)})
		}
	}
	conn := dialFrom(t, "127.0.0.2", addr)
	defer conn.Close()
	_, _ = conn.Write(raw[:len(raw)-10])
	waitUnverified(t, r, 1)
	other, _ := page(t, "other")
	keep(sendFrom(t, "127.0.0.3", addr, rawRequest{body: other, sig: sign(other)})) // 200
	slowAnswer(conn)                                                                // 429, evicted
	alone := dialFrom(t, "127.0.0.4", addr)
	defer alone.Close()
	_, _ = alone.Write(raw[:len(raw)-10])
	slowAnswer(alone) // 408
	// 503: JetStream gone.
	js.stop()
	keep(send(t, addr, rawRequest{body: other, sig: sign(other)}))
	keep(do(t, mustRequest(t, "GET", r.URL+"/readyz")))
	for _, s := range []int{200, 400, 401, 404, 405, 408, 413, 429, 431, 503} {
		if !seen[s] {
			t.Errorf("the run did not exercise a %d answer", s)
		}
	}
	r.stop(t)

	// A refused start: the error line names the variable, not its value.
	for _, bad := range []map[string]string{
		{"WEBHOOK_SECRETS": secrets[0], "NATS_USER": "crawl", "NATS_PASSWORD": secrets[2], "NATS_TOKEN": secrets[3],
			"RECEIVER_LISTEN": secrets[3], "NATS_REPLICAS": secrets[2]},
		// Decoded fine, refused by validation, which must not repeat values.
		{"WEBHOOK_SECRETS": secrets[0], "RECEIVER_LISTEN": secrets[3], "WEBHOOK_PATH": secrets[2]},
		// A NATS URL that does not parse, with a password in it.
		{"WEBHOOK_SECRETS": secrets[0], "NATS_URL": "nats://crawl:" + secrets[2] + "@127.0.0.1:port"},
	} {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := Run(ctx, []string{"receiver"}, func(k string) string { return bad[k] }, &out, &out)
		cancel()
		if err == nil {
			t.Fatal("a receiver with a bad config started")
		}
		answers = append(answers, err.Error(), out.String())
	}

	logs := r.logs.String()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("the secret %q appears in the logs", s)
		}
		for _, a := range answers {
			if strings.Contains(a, s) {
				t.Errorf("the secret %q appears in an answer or error: %s", s, a)
			}
		}
	}
}
