package receivercmd

import (
	"bufio"
	"fmt"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// metricValue reads one unlabelled sample from the receiver's /metrics.
func metricValue(t testing.TB, r *runningReceiver, name string) float64 {
	t.Helper()
	resp, err := http.Get(r.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// waitMetric waits until ok(value of name) holds.
func waitMetric(t testing.TB, r *runningReceiver, name string, what string, ok func(float64) bool) float64 {
	t.Helper()
	var v float64
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if v = metricValue(t, r, name); ok(v) {
			return v
		}
	}
	t.Fatalf("%s is %v, never %s", name, v, what)
	return v
}

// stall opens a connection, sends headers announcing contentLength bytes
// (signed with sig unless empty) and the first sent bytes of the body, and
// then nothing more. The connection is closed when the test ends.
func stall(t testing.TB, addr string, contentLength int64, sent int, sig string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST /webhooks/crawl HTTP/1.1\r\nHost: receiver\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", contentLength)
	if sig != "" {
		head += verify.DefaultHeader + ": " + sig + "\r\n"
	}
	if _, err := conn.Write(append([]byte(head+"\r\n"), make([]byte, sent)...)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// heapInuse is the process's in-use heap after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestStalledBodiesDoNotReserveMemory: 64 unsigned connections announcing
// 32 MB bodies (the default limit) that send 16 KiB and stall hold only
// what they sent, not what they announced: the heap stays far below the
// 2 GiB the announcements add up to, and signed deliveries meanwhile are
// answered 200 and stored.
func TestStalledBodiesDoNotReserveMemory(t *testing.T) {
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "LOG_LEVEL": "warn", "RECEIVER_BODY_TIMEOUT": "10m"})
	addr := strings.TrimPrefix(r.URL, "http://")
	before := heapInuse()

	const n = 64
	for i := 0; i < n; i++ {
		stall(t, addr, 32<<20, 16<<10, "")
	}
	waitMetric(t, r, "crawlhouse_webhook_unverified", "64", func(v float64) bool { return v == n })
	held := metricValue(t, r, "crawlhouse_webhook_inflight_bytes")
	grown := int64(heapInuse()) - int64(before)
	t.Logf("%d stalled connections announcing 32 MiB: %.0f body bytes held, heap grew %d KiB", n, held, grown>>10)
	// Each holds a first chunk (or a pooled buffer of at most 1 MiB): a few
	// MiB in all. Before, each held its whole announced 32 MiB.
	if held > n*(receiver.MaxPooledBody+receiver.FirstChunk) {
		t.Errorf("%.0f body bytes held by %d stalled connections", held, n)
	}
	if grown > 256<<20 {
		t.Errorf("the heap grew by %d MiB for %d stalled connections", grown>>20, n)
	}

	jsc := js.client(t)
	for i := 0; i < 5; i++ {
		body, _ := page(t, randomText(64<<10))
		if a := r.deliver(t, body); a.status != 200 {
			t.Fatalf("signed delivery %d beside the stalled ones: %d %s", i, a.status, a.body)
		}
	}
	if got := streamMsgs(t, jsc); got != 5 {
		t.Fatalf("%d messages in the stream, want 5", got)
	}
}

// TestBodyBudgetExhausted: with RECEIVER_MAX_INFLIGHT_BYTES taken by slow
// bodies, a delivery that cannot get its bytes is answered 429 overloaded
// with Retry-After; once the slow senders go, the bytes come back and the
// same delivery is accepted.
func TestBodyBudgetExhausted(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "LOG_LEVEL": "warn",
		"WEBHOOK_MAX_BODY_BYTES": "1048576", "RECEIVER_MAX_INFLIGHT_BYTES": "4194304"})
	addr := strings.TrimPrefix(r.URL, "http://")

	// Three senders announce 1 MiB, send 900 KiB and stall. One after the
	// other, each once the one before has finished growing: a buffer holds
	// its old and new copy while it grows (512 KiB and 1 MiB at the last
	// step), and two growing at once would not both fit the budget. A
	// buffer that has finished holds exactly the announced length plus the
	// byte that tells the end of the body, a figure no growing step passes
	// through.
	var conns []net.Conn
	for i := 1; i <= 3; i++ {
		conns = append(conns, stall(t, addr, 1<<20, 900<<10, "sha256="+strings.Repeat("0", 64)))
		want := float64(i * (1<<20 + 1))
		waitMetric(t, r, "crawlhouse_webhook_inflight_bytes", fmt.Sprint(want), func(v float64) bool { return v == want })
	}

	body, _ := page(t, randomText(1000<<10))
	a := send(t, addr, rawRequest{body: body, sig: verify.Header(testSecret, body)})
	if a.status != 429 || !strings.Contains(a.body, `"error":"overloaded"`) || a.header.Get("Retry-After") == "" {
		t.Fatalf("with the body budget taken: %d %s Retry-After=%q, want 429 overloaded", a.status, a.body, a.header.Get("Retry-After"))
	}
	for _, c := range conns {
		c.Close()
	}
	waitMetric(t, r, "crawlhouse_webhook_inflight_bytes", "0", func(v float64) bool { return v == 0 })
	if a := send(t, addr, rawRequest{body: body, sig: verify.Header(testSecret, body)}); a.status != 200 {
		t.Fatalf("after the slow senders left: %d %s", a.status, a.body)
	}
}

// TestBodyBudgetReleasedOnEveryPath: whatever a delivery ends with
// (accepted, duplicate, refused signature or payload, too large, timed out,
// broken off, not stored), the bytes it held go back to the budget
// (refused for want of budget: TestBodyBudgetExhausted).
func TestBodyBudgetReleasedOnEveryPath(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "LOG_LEVEL": "warn",
		"WEBHOOK_MAX_BODY_BYTES": "262144", "RECEIVER_MAX_INFLIGHT_BYTES": "600000",
		"RECEIVER_READ_TIMEOUT": "1s", "RECEIVER_PUBLISH_TIMEOUT": "500ms"})
	addr := strings.TrimPrefix(r.URL, "http://")
	zero := func(what string) {
		t.Helper()
		waitMetric(t, r, "crawlhouse_webhook_inflight_bytes", "0 after "+what, func(v float64) bool { return v == 0 })
	}
	sign := func(b []byte) string { return verify.Header(testSecret, b) }
	expect := func(what string, a answer, status int) {
		t.Helper()
		if a.status != status {
			t.Fatalf("%s: %d %s, want %d", what, a.status, a.body, status)
		}
		zero(what)
	}

	body, _ := page(t, randomText(100<<10))
	expect("accepted", send(t, addr, rawRequest{body: body, sig: sign(body)}), 200)
	expect("duplicate", send(t, addr, rawRequest{body: body, sig: sign(body)}), 200)
	expect("bad signature", send(t, addr, rawRequest{body: body, sig: verify.Header("wrong", body)}), 401)
	expect("no signature", send(t, addr, rawRequest{body: body, chunked: true}), 401)
	bad := []byte(`{"type":"crawl.page"}`)
	expect("invalid payload", send(t, addr, rawRequest{body: bad, sig: sign(bad)}), 400)
	big := make([]byte, 300<<10)
	expect("too large, chunked", send(t, addr, rawRequest{body: big, sig: sign(big), chunked: true}), 413)
	expect("too large, announced", send(t, addr, rawRequest{body: big, sig: sign(big)}), 413)

	// Timed out: 100 KiB of 200 KiB, then nothing until RECEIVER_READ_TIMEOUT.
	conn := stall(t, addr, 200<<10, 100<<10, "")
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("timed out body: %v", err)
	}
	resp.Body.Close()
	expect("timed out", answer{status: resp.StatusCode}, 408)

	// Broken off: the sender closes in the middle of its body.
	conn = stall(t, addr, 200<<10, 100<<10, "")
	waitMetric(t, r, "crawlhouse_webhook_inflight_bytes", "held", func(v float64) bool { return v > 0 })
	conn.Close()
	zero("broken off")

	// Not stored: JetStream is gone, the publish fails with 503.
	js.stop()
	body3, _ := page(t, "not stored")
	expect("not stored", send(t, addr, rawRequest{body: body3, sig: sign(body3)}), 503)
}
