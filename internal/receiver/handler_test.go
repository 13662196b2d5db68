package receiver

// The delivery handler's contract, against httptest and a real JetStream
// embedded in the test process: every delivery verified, bounded,
// validated and deduplicated, and answered 200 only once JetStream has
// stored it. What crosses processes (start-up, shutdown, JetStream
// restarting, the write-ahead log, clients that hold connections open)
// stays in internal/receivercmd.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDeliveryAnswers: every answer the handler gives a delivery, with its
// exact body, in order: the first is stored, the same delivery again is a
// duplicate (not stored twice), and a signature that is missing, malformed,
// made with another or a retired secret, or made over other bytes (an
// earlier version of the body) is refused before the body is parsed;
// a signed body that is not a delivery is refused naming the field; a body
// past WEBHOOK_MAX_BODY_BYTES is refused. The counters say the same, and
// the secret is never logged.
func TestDeliveryAnswers(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"WEBHOOK_MAX_BODY_BYTES": "2000"})
	good, id := page(t, "# hello")
	earlier := bytes.Replace(good, []byte("# hello"), []byte("# hell0"), 1)
	sign := func(b []byte) string { return verify.Header(testSecret, b) }
	const uuidMsg = "must be a UUID like 0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	delivery := func(fields string) []byte {
		return []byte(`{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"` + id + `","data":[]` + fields + `}`)
	}

	cases := []struct {
		name       string
		body       []byte
		sig        string // "": signed with testSecret when the status is 400 or 413
		wantStatus int
		wantBody   string
	}{
		{"accepted", good, sign(good), 200, `{"status":"accepted","webhookId":"` + id + `"}`},
		{"duplicate", good, sign(good), 200, `{"status":"duplicate","webhookId":"` + id + `"}`},
		{"signature missing", good, "", 401, `{"error":"invalid_signature","message":"signature missing"}`},
		{"signature malformed", good, "sha1=abc", 401, `{"error":"invalid_signature","message":"signature malformed: want sha256=<hex>"}`},
		{"signature not hex", good, "sha256=" + strings.Repeat("z", 64), 401, `{"error":"invalid_signature","message":"signature malformed: not hex"}`},
		{"signature short", good, "sha256=abcd", 401, ``},
		{"signature wrong secret", good, verify.Header("other", good), 401, `{"error":"invalid_signature","message":"signature mismatch"}`},
		{"signature of a retired secret", good, verify.Header("test-secret-2025", good), 401, `{"error":"invalid_signature","message":"signature mismatch"}`},
		{"signature of the earlier body", good, sign(earlier), 401, `{"error":"invalid_signature","message":"signature mismatch"}`},
		{"signature of other bytes", good, sign(append([]byte(" "), good...)), 401, `{"error":"invalid_signature","message":"signature mismatch"}`},
		{"not JSON", []byte("hello"), "", 400, `{"error":"invalid_payload","message":"body is not a JSON object"}`},
		{"broken JSON", []byte(`{"type":`), "", 400, ``},
		{"missing type", []byte(`{"success":true,"id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"` + id + `","data":[]}`), "", 400, `{"error":"invalid_payload","message":"type: is required"}`},
		{"id not UUID", []byte(`{"success":true,"type":"crawl.page","id":"abc","webhookId":"` + id + `","data":[]}`), "", 400, `{"error":"invalid_payload","message":"id: ` + uuidMsg + `"}`},
		{"webhookId not UUID", []byte(`{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"abc","data":[]}`), "", 400, `{"error":"invalid_payload","message":"webhookId: ` + uuidMsg + `"}`},
		{"success not boolean", []byte(`{"success":"yes","type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"` + id + `","data":[]}`), "", 400, `{"error":"invalid_payload","message":"success: must be a boolean"}`},
		{"data not array", []byte(`{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"` + id + `","data":{}}`), "", 400, `{"error":"invalid_payload","message":"data: must be an array of documents"}`},
		{"trailing bytes", append(delivery(""), " {}"...), "", 400, ``},
		{"too large", []byte(`{"x":"` + strings.Repeat("a", 2000) + `"}`), "", 413, `{"error":"payload_too_large","message":"payload too large"}`},
	}
	for _, tc := range cases {
		// In order, not in parallel: the duplicate follows the first delivery.
		t.Run(tc.name, func(t *testing.T) {
			sig := tc.sig
			if sig == "" && (tc.wantStatus == 400 || tc.wantStatus == 413) {
				sig = sign(tc.body)
			}
			h := map[string]string{}
			if sig != "" {
				h[verify.DefaultHeader] = sig
			}
			a := s.post(t, tc.body, h)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d, want %d (%s)", a.status, tc.wantStatus, a.body)
			}
			if tc.wantBody != "" && a.body != tc.wantBody {
				t.Errorf("body\n got %s\nwant %s", a.body, tc.wantBody)
			}
			if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	if n := s.streamMsgs(t); n != 1 {
		t.Errorf("stream holds %d messages, want 1 (the duplicate is not stored)", n)
	}
	metrics := s.metrics(t)
	for _, want := range []string{
		`crawlhouse_webhook_deliveries_total{outcome="accepted"} 1`,
		`crawlhouse_webhook_deliveries_total{outcome="duplicate"} 1`,
		`crawlhouse_webhook_deliveries_total{outcome="invalid_signature"} 8`,
		`crawlhouse_webhook_deliveries_total{outcome="invalid_payload"} 8`,
		`crawlhouse_webhook_deliveries_total{outcome="too_large"} 1`,
		`crawlhouse_webhook_publish_seconds_count 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(s.logs.String(), testSecret) {
		t.Error("the secret appears in the logs")
	}
}

// TestDeliveryStoredAsReceived: the byte-exact deliveries of the real
// sender, with its signatures, and deliveries of any other type with a
// valid envelope, are stored on their type's subject byte for byte, with
// the envelope's headers (the message id JetStream deduplicates on, the
// crawl).
func TestDeliveryStoredAsReceived(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	for _, tc := range []struct {
		file, webhookID, subject string
	}{
		{"crawl-page.json", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "crawl.events.crawl.page"},
		{"crawl-page-failed.json", "3b2f1c9e-8d7a-4c6b-9e5f-0a1b2c3d4e5f", "crawl.events.crawl.page"},
		{"crawl-completed.json", "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", "crawl.events.crawl.completed"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body, sig := fixture(t, tc.file)
			a := s.post(t, body, map[string]string{verify.DefaultHeader: sig})
			want := `{"status":"accepted","webhookId":"` + tc.webhookID + `"}`
			if a.status != http.StatusOK || a.body != want {
				t.Fatalf("got %d %s, want 200 %s", a.status, a.body, want)
			}
			msg := s.lastMsg(t, tc.subject)
			if got := msg.Header.Get(delivery.HeaderMsgID); got != tc.webhookID {
				t.Errorf("Nats-Msg-Id = %q, want %q", got, tc.webhookID)
			}
			if got := msg.Header.Get(delivery.HeaderReceivedAt); got == "" {
				t.Error("no Crawlhouse-Received-At header")
			}
			// The crawl id and the type travel in the body alone (the sink
			// reads them there): only the id and time are headers.
			if len(msg.Header) != 2 {
				t.Errorf("headers %v, want Nats-Msg-Id and Crawlhouse-Received-At alone", msg.Header)
			}
			if !bytes.Equal(msg.Data, body) {
				t.Errorf("stored body differs from the delivery")
			}
		})
	}
	for _, typ := range []string{"crawl.started", "batch_scrape.page", "crawl.something_new"} {
		body, _ := page(t, "x")
		body = bytes.Replace(body, []byte(`"type":"crawl.page"`), []byte(`"type":"`+typ+`"`), 1)
		if a := s.deliver(t, body); a.status != 200 {
			t.Fatalf("%s: %d %s", typ, a.status, a.body)
		}
		if msg := s.lastMsg(t, "crawl.events."+typ); !bytes.Equal(msg.Data, body) {
			t.Errorf("%s: stored body differs", typ)
		}
	}
}

// TestSignatureHeadersAndSecrets: a valid signature made with any of the
// configured secrets (rotation) is enough, in either header by default,
// and an invalid one never is; WEBHOOK_SIGNATURE_HEADER set makes only
// that header count.
func TestSignatureHeadersAndSecrets(t *testing.T) {
	t.Parallel()
	body, _ := page(t, "rotation")
	old, cur := verify.Header("old-secret", body), verify.Header("new-secret", body)
	wrong := verify.Header("not-the-secret", body)
	const fc, svc = verify.FirecrawlHeader, verify.DefaultHeader
	for _, tc := range []struct {
		name   string
		pinned string
		h      map[string]string
		want   int
	}{
		{"default: real API header", "", map[string]string{fc: cur}, 200},
		{"default: interface header", "", map[string]string{svc: cur}, 200},
		{"default: the older secret", "", map[string]string{fc: old}, 200},
		{"default: invalid beside valid", "", map[string]string{svc: wrong, fc: cur}, 200},
		{"default: valid beside malformed", "", map[string]string{svc: cur, fc: "sha256=nothex"}, 200},
		{"default: invalid only", "", map[string]string{fc: wrong}, 401},
		{"default: both invalid", "", map[string]string{svc: wrong, fc: wrong}, 401},
		{"default: in another header", "", map[string]string{"X-Signature": cur}, 401},
		{"pinned to interface header: real API header", svc, map[string]string{fc: cur}, 401},
		{"pinned to interface header: its own", svc, map[string]string{svc: old}, 200},
		{"pinned to interface header: invalid there, valid elsewhere", svc, map[string]string{svc: wrong, fc: cur}, 401},
		{"pinned to real API header: interface header", fc, map[string]string{svc: cur}, 401},
		{"pinned to real API header: its own", fc, map[string]string{fc: cur}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"WEBHOOK_SECRETS": "old-secret, new-secret"}
			if tc.pinned != "" {
				env["WEBHOOK_SIGNATURE_HEADER"] = tc.pinned
			}
			s := startServer(t, env)
			a := s.post(t, body, tc.h)
			if a.status != tc.want {
				t.Fatalf("%v: %d %s, want %d", tc.h, a.status, a.body, tc.want)
			}
			if tc.want == 401 && !strings.Contains(a.body, `"error":"invalid_signature"`) {
				t.Fatalf("401 with body %s", a.body)
			}
			want := uint64(0)
			if tc.want == 200 {
				want = 1
			}
			if n := s.streamMsgs(t); n != want {
				t.Errorf("stream holds %d messages, want %d", n, want)
			}
		})
	}
}

// TestBodyBound: a body of exactly WEBHOOK_MAX_BODY_BYTES is accepted; one
// byte more is 413 whether the sender announced its length or not (a
// chunked body is cut at the limit, never read whole), and nothing of it
// is stored.
func TestBodyBound(t *testing.T) {
	t.Parallel()
	body, _ := page(t, strings.Repeat("a", 4000))
	s := startServer(t, map[string]string{"WEBHOOK_MAX_BODY_BYTES": fmt.Sprint(len(body))})
	over, _ := page(t, strings.Repeat("a", 4001))
	if len(over) != len(body)+1 {
		t.Fatalf("test bodies of %d and %d bytes, want one byte apart", len(body), len(over))
	}
	const tooLarge = `{"error":"payload_too_large","message":"payload too large"}`
	for _, tc := range []struct {
		name    string
		body    []byte
		chunked bool
		status  int
	}{
		{"at the limit, announced", body, false, 200},
		{"one byte past, announced", over, false, 413},
		{"one byte past, chunked", over, true, 413},
		{"far past, chunked", append(over, bytes.Repeat([]byte(" "), 1<<20)...), true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tc.body)
			if tc.chunked {
				r = io.MultiReader(r) // not a type whose length http.NewRequest can tell
			}
			req, err := http.NewRequest(http.MethodPost, s.URL+"/webhooks/crawl", r)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(verify.DefaultHeader, verify.Header(testSecret, tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil && len(tc.body) > 2*len(over) && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
				// The receiver answered 413 and closed while the sender
				// was still writing a body far past the bound: whether
				// the answer or the reset reaches the sender first is the
				// network's race. Refused either way (the stream is
				// checked below).
				return
			}
			if err != nil {
				t.Fatalf("%s %s: %v", req.Method, req.URL, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a := answer{resp.StatusCode, resp.Header, strings.TrimSpace(string(b))}
			if a.status != tc.status || (tc.status == 413 && a.body != tooLarge) {
				t.Fatalf("%d %s, want %d", a.status, a.body, tc.status)
			}
		})
	}
	if n := s.streamMsgs(t); n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
}

// TestAnsweredAfterPubAck: the answer is written only once JetStream has
// acknowledged the delivery: when the handler writes its status, the
// publish has returned its PubAck and the stream already holds the
// message. A publish that fails is answered 503 with Retry-After, never
// 200.
func TestAnsweredAfterPubAck(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []string
	record := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	var s *testServer
	s = startServer(t, nil, func(next Publisher) Publisher {
		return publisherFunc(func(ctx context.Context, env *delivery.Envelope) (stream.Ack, error) {
			ack, err := next.Publish(ctx, env)
			if err == nil && ack.Sequence > 0 {
				record(fmt.Sprintf("pubacked seq %d", ack.Sequence))
			}
			return ack, err
		})
	})
	watched := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Handler().ServeHTTP(&watchedWriter{ResponseWriter: w, wrote: func(status int) {
			record(fmt.Sprintf("answered %d", status))
			record(fmt.Sprintf("%d stored", s.streamMsgs(t)))
		}}, r)
	}))
	t.Cleanup(watched.Close)

	body, id := page(t, "after the PubAck")
	req, err := http.NewRequest(http.MethodPost, watched.URL+"/webhooks/crawl", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(verify.DefaultHeader, verify.Header(testSecret, body))
	if a := do(t, req); a.status != 200 || a.body != `{"status":"accepted","webhookId":"`+id+`"}` {
		t.Fatalf("%d %s", a.status, a.body)
	}
	mu.Lock()
	got := strings.Join(events, "; ")
	mu.Unlock()
	if want := "pubacked seq 1; answered 200; 1 stored"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// publisherFunc is a Publisher made of a function.
type publisherFunc func(ctx context.Context, env *delivery.Envelope) (stream.Ack, error)

func (f publisherFunc) Publish(ctx context.Context, env *delivery.Envelope) (stream.Ack, error) {
	return f(ctx, env)
}

// watchedWriter calls wrote with the status before the first byte of the
// answer is written.
type watchedWriter struct {
	http.ResponseWriter
	wrote   func(status int)
	written bool
}

func (w *watchedWriter) WriteHeader(status int) {
	if !w.written {
		w.written = true
		w.wrote(status)
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *watchedWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.written = true
		w.wrote(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (pace.go).
func (w *watchedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestUnavailableAnswers503: with the connection to JetStream cut, a
// delivery is answered 503 with Retry-After and is not stored; once the
// connection is back, the same delivery is accepted and stored once.
func TestUnavailableAnswers503(t *testing.T) {
	t.Parallel()
	url := streamtest.Start(t)
	nc, proxy := streamtest.ConnectThrough(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := startServerOn(t, map[string]string{"RECEIVER_PUBLISH_TIMEOUT": "1s"}, url, js, func(cfg Config) Publisher {
		p := stream.NewPublisher(nc, js, cfg.StreamConfig, stream.PublisherOptions{})
		t.Cleanup(p.Close)
		return p
	})
	_, s.js = streamtest.Connect(t, url) // the test reads past the proxy

	proxy.Cut()
	body, id := page(t, "while cut")
	a := s.deliver(t, body)
	if a.status != 503 || a.body != `{"error":"unavailable","message":"JetStream did not confirm the delivery in time; retry later"}` {
		t.Fatalf("cut: %d %s", a.status, a.body)
	}
	if a.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	proxy.Mend()
	for deadline := time.Now().Add(30 * time.Second); !nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not reconnected 30s after the proxy was mended")
		}
	}
	if n := s.streamMsgs(t); n != 0 {
		t.Fatalf("the stream holds %d messages after the 503, want 0", n)
	}
	if a := s.deliver(t, body); a.status != 200 || a.body != `{"status":"accepted","webhookId":"`+id+`"}` {
		t.Fatalf("after the connection is back: %d %s", a.status, a.body)
	}
	if n := s.streamMsgs(t); n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
}

// TestRedeliveredAtOnce: deliveries each sent twice at the same moment
// (the sender retrying while the first is in progress), with and without
// group commit (atomic batches), are each answered 200, once "accepted"
// and once "duplicate", and stored once.
func TestRedeliveredAtOnce(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"true", "false"} {
		t.Run("group_commit="+group, func(t *testing.T) {
			t.Parallel()
			testRedeliveredAtOnce(t, startServer(t, map[string]string{"RECEIVER_GROUP_COMMIT": group}))
		})
	}
}

func testRedeliveredAtOnce(t *testing.T, s *testServer) {
	const n = 50
	var wg sync.WaitGroup
	answers := make([][2]answer, n)
	for i := range n {
		body, _ := page(t, "page")
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i][j] = s.deliver(t, body)
			}()
		}
	}
	wg.Wait()
	for i, pair := range answers {
		got := pair[0].body + " " + pair[1].body
		if pair[0].status != 200 || pair[1].status != 200 ||
			strings.Count(got, `"accepted"`) != 1 || strings.Count(got, `"duplicate"`) != 1 {
			t.Errorf("pair %d: %d %d %s", i, pair[0].status, pair[1].status, got)
		}
	}
	if got := s.streamMsgs(t); got != n {
		t.Errorf("stream holds %d messages, want %d", got, n)
	}
}

// TestUnsignedDoNotCrowdOutSigned: unsigned bodies that arrive slowly from
// several addresses fill the pool of unverified bodies
// (RECEIVER_MAX_UNVERIFIED) and outnumber the in-flight slots
// (RECEIVER_MAX_INFLIGHT); a signed delivery from another address is
// still served: the slowest unsigned body is evicted to make room (429,
// outcome evicted), and once the address is trusted its deliveries skip
// the pool. The addresses come from X-Forwarded-For through a trusted
// proxy, as behind a load balancer.
func TestUnsignedDoNotCrowdOutSigned(t *testing.T) {
	t.Parallel()
	const pool = 4
	s := startServer(t, map[string]string{
		"RECEIVER_TRUSTED_PROXIES": "127.0.0.1", "RECEIVER_MAX_INFLIGHT": "1",
		"RECEIVER_MAX_UNVERIFIED": fmt.Sprint(pool), "RECEIVER_MAX_UNVERIFIED_PER_ADDR": "2",
		"RECEIVER_BODY_TIMEOUT": "10m", "RECEIVER_READ_TIMEOUT": "10m",
	})
	var slow []*heldBody
	fill := func() {
		for n := s.admission.Reading(); n < pool; n++ {
			slow = append(slow, holdBody(t, s, fmt.Sprintf("203.0.113.%d", len(slow)+1)))
			waitFor(t, fmt.Sprintf("%d unverified bodies", n+1), func() bool { return s.admission.Reading() == n+1 })
		}
	}
	for i := range 8 {
		// Full again before each: only an address not trusted yet needs
		// a place in the pool.
		fill()
		body, id := page(t, fmt.Sprint("signed ", i))
		a := s.post(t, body, map[string]string{"X-Forwarded-For": "198.51.100.7", verify.DefaultHeader: verify.Header(testSecret, body)})
		if a.status != 200 || a.body != `{"status":"accepted","webhookId":"`+id+`"}` {
			t.Fatalf("signed delivery %d beside %d slow unsigned bodies: %d %s", i, pool, a.status, a.body)
		}
	}
	// Each place a signed delivery took was refilled by fill.
	if evicted := len(slow) - pool; evicted != 1 {
		t.Errorf("%d slow bodies evicted, want 1 (the place the first signed delivery needed; the address is trusted from then on)", evicted)
	}
	a := <-slow[0].answer // the oldest, slowest body
	if a.status != 429 || a.header.Get("Retry-After") == "" {
		t.Errorf("the evicted body: %d %s, want 429 with Retry-After", a.status, a.body)
	}
	if got := s.streamMsgs(t); got != 8 {
		t.Errorf("stream holds %d messages, want the 8 signed deliveries", got)
	}
	if m := s.metrics(t); !strings.Contains(m, `crawlhouse_webhook_deliveries_total{outcome="evicted"} 1`) {
		t.Errorf("metrics lack one evicted delivery")
	}
}

// heldBody is an unsigned delivery whose body has begun to arrive and
// waits for more, until the test ends.
type heldBody struct {
	answer chan answer
}

// holdBody starts an unsigned delivery from addr (X-Forwarded-For) that
// announces 64 KiB and sends 10 bytes of it.
func holdBody(t *testing.T, s *testServer, addr string) *heldBody {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	req, err := http.NewRequest(http.MethodPost, s.URL+"/webhooks/crawl", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 64 << 10
	req.Header.Set("X-Forwarded-For", addr)
	h := &heldBody{answer: make(chan answer, 1)}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			h.answer <- answer{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		h.answer <- answer{resp.StatusCode, resp.Header, strings.TrimSpace(string(b))}
	}()
	go func() { _, _ = pw.Write([]byte(`{"success":`)) }()
	return h
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// TestPublishOutlivesTheSender: a sender that hangs up while its delivery
// is being published does not cut the publish short: the delivery is
// stored (bounded by RECEIVER_PUBLISH_TIMEOUT alone), so the sender's
// retry finds it a duplicate rather than a publish abandoned half way.
func TestPublishOutlivesTheSender(t *testing.T) {
	t.Parallel()
	reqCtx := make(chan context.Context, 1)
	entered, published := make(chan struct{}), make(chan error, 1)
	var held atomic.Bool // the first publish only
	s := startServer(t, nil, func(next Publisher) Publisher {
		return publisherFunc(func(ctx context.Context, env *delivery.Envelope) (stream.Ack, error) {
			if !held.CompareAndSwap(false, true) {
				return next.Publish(ctx, env)
			}
			close(entered)
			<-(<-reqCtx).Done() // the sender has hung up, and the server noticed
			ack, err := next.Publish(ctx, env)
			published <- err
			return ack, err
		})
	})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case reqCtx <- r.Context():
		default:
		}
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	body, id := page(t, "hung up")
	ctx, hangUp := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+"/webhooks/crawl", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(verify.DefaultHeader, verify.Header(testSecret, body))
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	hangUp()
	if err := <-published; err != nil {
		t.Fatalf("the publish, once the sender hung up: %v, want it stored", err)
	}
	if a := s.deliver(t, body); a.status != 200 || a.body != `{"status":"duplicate","webhookId":"`+id+`"}` {
		t.Fatalf("the sender's retry: %d %s, want a duplicate", a.status, a.body)
	}
}

// TestPublishOutlastsTheBodyDeadline: a publish that takes longer than the
// body was allowed (RECEIVER_BODY_TIMEOUT and RECEIVER_READ_TIMEOUT of 2 s)
// is still answered 200, and the connection carries the sender's next
// delivery: the body's read deadline no longer applies once the body has
// arrived, from a trusted sender as from an untrusted one, and the publish
// does not depend on the request's context.
func TestPublishOutlastsTheBodyDeadline(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	held := make(chan struct{}, 2)
	s := startServer(t, map[string]string{"RECEIVER_BODY_TIMEOUT": "2s", "RECEIVER_READ_TIMEOUT": "2s"},
		func(next Publisher) Publisher {
			return publisherFunc(func(ctx context.Context, env *delivery.Envelope) (stream.Ack, error) {
				if bytes.Contains(env.Body, []byte("held")) {
					held <- struct{}{}
					<-release
				}
				return next.Publish(ctx, env)
			})
		})
	// One connection for every request, so that the second delivery of
	// each case finds the first's connection.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	// post says whether the delivery went on a connection used before, or
	// why it was not accepted.
	post := func(text string) (bool, error) {
		body, id := page(t, text)
		req, err := http.NewRequest(http.MethodPost, s.URL+"/webhooks/crawl", bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set(verify.DefaultHeader, verify.Header(testSecret, body))
		reused := false
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if got := strings.TrimSpace(string(b)); resp.StatusCode != 200 || got != `{"status":"accepted","webhookId":"`+id+`"}` {
			return false, fmt.Errorf("%d %s, want 200 accepted", resp.StatusCode, got)
		}
		return reused, nil
	}
	type result struct {
		reused bool
		err    error
	}
	for _, sender := range []string{"untrusted (its first delivery)", "trusted"} {
		answered := make(chan result, 1)
		go func() { reused, err := post("held, " + sender); answered <- result{reused, err} }()
		select {
		case <-held:
		case r := <-answered:
			t.Fatalf("%s sender: answered before its publish was held: %v", sender, r.err)
		}
		// Past every deadline the body had: 2 s from the request's start.
		time.Sleep(3 * time.Second)
		release <- struct{}{}
		first := <-answered
		if first.err != nil {
			t.Fatalf("%s sender, the delivery whose publish outlasted the body's deadline: %v", sender, first.err)
		}
		if sender == "trusted" && !first.reused {
			t.Fatal("the trusted sender's held delivery was not on the connection of its first")
		}
		if reused, err := post("next, " + sender); err != nil || !reused {
			t.Fatalf("%s sender: the next delivery: %v, kept-alive connection %v", sender, err, reused)
		}
	}
}
