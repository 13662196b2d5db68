package crawlsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// receiver is a minimal webhook receiver: it checks signatures, records
// every POST, and can answer 503 or stall on chosen attempts.
type receiver struct {
	t        *testing.T
	header   string
	verifier *verify.Verifier
	// fail answers 503 to the first N attempts of a webhookId; stall
	// holds the first attempt until the sender gives up on it.
	fail  map[string]int
	stall map[string]bool

	mu       sync.Mutex
	posts    map[string][][]byte
	order    []string
	inflight int
}

func newReceiver(t *testing.T, secret, header string) (*receiver, *httptest.Server) {
	r := &receiver{t: t, header: header, fail: map[string]int{}, stall: map[string]bool{}, posts: map[string][][]byte{}}
	if secret != "" {
		r.verifier, _ = verify.New([]string{secret})
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	h, err := events.Validate(body)
	if err != nil {
		r.t.Errorf("invalid delivery: %v", err)
		w.WriteHeader(400)
		return
	}
	r.mu.Lock()
	r.inflight++
	n := len(r.posts[h.WebhookID])
	r.posts[h.WebhookID] = append(r.posts[h.WebhookID], body)
	r.order = append(r.order, h.Type)
	fail, stall := n < r.fail[h.WebhookID], n == 0 && r.stall[h.WebhookID]
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight--
		r.mu.Unlock()
	}()
	time.Sleep(2 * time.Millisecond)
	if r.verifier != nil {
		if err := r.verifier.Verify(req.Header.Get(r.header), body); err != nil {
			w.WriteHeader(401)
			return
		}
	} else if req.Header.Get(r.header) != "" {
		r.t.Errorf("unsigned sender sent %s", r.header)
	}
	if stall {
		<-req.Context().Done()
	}
	if fail {
		w.WriteHeader(503)
		return
	}
	status := "accepted"
	if n > 0 {
		status = "duplicate"
	}
	fmt.Fprintf(w, `{"status":%q,"webhookId":%q}`, status, h.WebhookID)
}

func TestSenderDeliversWithFaultsAndRetries(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 60, Seed: 3, Faults: Faults{Duplicates: 0.1, Drops: 0.1, Failures: 0.1, BadSignatures: 0.05}})
	rcv, srv := newReceiver(t, "s3cret", "X-Firecrawl-Signature")
	var flaky, slow *Page
	for _, p := range c.Pages {
		if len(p.Faults) == 0 && flaky == nil {
			flaky = p
		} else if len(p.Faults) == 0 && slow == nil {
			slow = p
		}
	}
	rcv.fail[flaky.WebhookID] = 2
	rcv.stall[slow.WebhookID] = true

	api := NewAPI(APIOptions{})
	api.Add(c)
	// Concurrency is the sender's promise, so it is counted at the sender:
	// the receiver would also count the stalled handler the sender has
	// already given up on.
	counting := &countingTransport{next: http.DefaultTransport}
	s, err := NewSender(SenderOptions{Target: srv.URL, Secret: "s3cret", SignatureHeader: "X-Firecrawl-Signature",
		Concurrency: 4, Timeout: 2 * time.Second, RetryDelays: []time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond},
		Client: &http.Client{Transport: counting}})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Send(context.Background(), c)

	want := Summary{Pages: 60, Successful: 54, Failed: 6, Dropped: 6, Duplicated: 6, BadSignatures: 3, Accepted: 51, Rejected: 3, BackfillOnly: 9}
	got := r.Summary
	got.Attempts, got.Retries, got.Cancelled, got.Oversized = 0, 0, 0, 0
	if got != want {
		t.Fatalf("summary\n got %+v\nwant %+v", got, want)
	}
	if r.Status != crawlapi.StatusCompleted || c.Status() != crawlapi.StatusCompleted {
		t.Fatalf("crawl status %s", r.Status)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if peak := counting.peak.Load(); peak > 4 || peak < 1 {
		t.Fatalf("%d POSTs in flight at the sender, concurrency 4", peak)
	}
	if rcv.order[0] != "crawl.started" {
		t.Fatalf("first delivery %s", rcv.order[0])
	}
	byID := map[string]Delivery{}
	for _, d := range r.Deliveries {
		byID[d.WebhookID] = d
	}
	for _, p := range c.Pages {
		posts, d := rcv.posts[p.WebhookID], byID[p.WebhookID]
		for _, b := range posts {
			if !bytes.Equal(b, p.Body) {
				t.Fatalf("page %d: a retry changed the bytes", p.Index)
			}
		}
		switch {
		case p.Has(FaultDrop):
			if len(posts) != 0 || d.Outcome != OutcomeDropped {
				t.Fatalf("dropped page %d sent %d times (%s)", p.Index, len(posts), d.Outcome)
			}
		case p.Has(FaultBadSignature):
			if len(posts) != 4 || d.Outcome != OutcomeRejected || fmt.Sprint(d.Statuses) != "[401 401 401 401]" {
				t.Fatalf("bad signature page %d: %d posts, %+v", p.Index, len(posts), d)
			}
		case p == flaky:
			if fmt.Sprint(d.Statuses) != "[503 503 200]" || d.Outcome != OutcomeAccepted {
				t.Fatalf("flaky page: %+v", d)
			}
		case p == slow:
			if fmt.Sprint(d.Statuses) != "[0 200]" || d.Outcome != OutcomeAccepted {
				t.Fatalf("slow page: %+v", d)
			}
		case p.Has(FaultDuplicate):
			if len(posts) != 2 || d.Answer != "accepted" {
				t.Fatalf("duplicated page %d: %d posts, %+v", p.Index, len(posts), d)
			}
		default:
			if len(posts) != 1 || d.Outcome != OutcomeAccepted {
				t.Fatalf("page %d: %d posts, %+v", p.Index, len(posts), d)
			}
		}
	}
	var completed int
	for _, d := range r.Deliveries {
		if d.Type == "crawl.completed" {
			completed++
			if b := rcv.posts[d.WebhookID]; len(b) != 1 || !bytes.Contains(b[0], []byte(`"data":[]`)) {
				t.Fatalf("crawl.completed: %q", b)
			}
		}
	}
	if completed != 1 {
		t.Fatalf("%d crawl.completed", completed)
	}
}

func TestSenderUnsignedWithoutSecret(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 3})
	rcv, srv := newReceiver(t, "", verify.DefaultHeader)
	s, _ := NewSender(SenderOptions{Target: srv.URL, RetryDelays: []time.Duration{}})
	r := s.Send(context.Background(), c)
	if r.Summary.Accepted != 3 || len(rcv.posts) != 5 {
		t.Fatalf("%+v, %d webhook ids", r.Summary, len(rcv.posts))
	}
}

// At a rate, the sender paces first attempts by a ticker of period
// 1/rate: no page goes out before its tick. The test hands out the ticks.
func TestSenderRate(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 10})
	rcv, srv := newReceiver(t, "", verify.DefaultHeader)
	s, _ := NewSender(SenderOptions{Target: srv.URL, Rate: 100, Concurrency: 1})
	ticks := make(chan time.Time)
	var period time.Duration
	s.ticker = func(d time.Duration) (<-chan time.Time, func()) { period = d; return ticks, func() {} }
	pages := func() int {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		n := 0
		for _, typ := range rcv.order {
			if typ == "crawl.page" {
				n++
			}
		}
		return n
	}
	done := make(chan *Report, 1)
	go func() { done <- s.Send(context.Background(), c) }()
	for i := 1; i <= 10; i++ {
		ticks <- time.Now() // taken only when the sender is ready for page i
		// Page i may go now, and no page after it until the next tick.
		for deadline := time.Now().Add(time.Minute); pages() < i; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("page %d not sent after its tick", i)
			}
		}
		if n := pages(); n != i {
			t.Fatalf("after %d ticks, %d pages sent", i, n)
		}
	}
	if r := <-done; r.Summary.Accepted != 10 || period != 10*time.Millisecond {
		t.Fatalf("%+v, ticker period %v (want 10ms for 100/s)", r.Summary, period)
	}
}

// Stopping a run reports what was not delivered as cancelled, and returns
// without waiting for the long retry delays.
func TestSenderStopsWithContext(t *testing.T) {
	t.Parallel()
	c := newCrawl(t, Options{Pages: 5})
	rcv, srv := newReceiver(t, "", verify.DefaultHeader)
	for _, p := range c.Pages {
		rcv.fail[p.WebhookID] = 100
	}
	s, _ := NewSender(SenderOptions{Target: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// Without the context the retries would wait minutes (the default
	// delays), and the test would hit its timeout.
	r := s.Send(ctx, c)
	if r.Summary.Cancelled != 5 {
		t.Fatalf("%+v", r.Summary)
	}
}

// The binary sends, prints the summary, writes the manifest and serves the
// status API.
func TestRunWritesManifest(t *testing.T) {
	t.Parallel()
	rcv, srv := newReceiver(t, "k", verify.DefaultHeader)
	manifest := filepath.Join(t.TempDir(), "run.json")
	var out, errOut strings.Builder
	env := map[string]string{"WEBHOOK_SECRET": "k"}
	err := Run(context.Background(), []string{"-pages", "20", "-drops", "0.3", "-failures", "0.1", "-seed", "9",
		"-target", srv.URL, "-listen", "127.0.0.1:0", "-exit", "-manifest", manifest, "-retry-delays", "1ms"},
		func(k string) string { return env[k] }, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "pages: 20 (18 successful, 2 failed)") || !strings.Contains(out.String(), "6 dropped") {
		t.Fatalf("summary:\n%s", out.String())
	}
	r, err := ReadManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.Dropped != 6 || r.Summary.Accepted != 14 || len(r.Deliveries) != 22 || r.Deliveries[0].Type != "crawl.started" {
		t.Fatalf("manifest %+v", r.Summary)
	}
	var raw map[string]any
	b, _ := os.ReadFile(manifest)
	json.Unmarshal(b, &raw)
	if raw["crawlId"] != r.CrawlID || len(rcv.posts) != 16 {
		t.Fatalf("manifest crawlId %v, %d webhook ids received", raw["crawlId"], len(rcv.posts))
	}
	if err := Run(context.Background(), []string{"-pages", "-1", "-exit"}, func(string) string { return "" }, &out, &errOut); err == nil {
		t.Fatal("negative pages accepted")
	}
}

// countingTransport records the most round trips in flight at once.
type countingTransport struct {
	next     http.RoundTripper
	inflight atomic.Int64
	peak     atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	n := c.inflight.Add(1)
	defer c.inflight.Add(-1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		// The POST is in flight until its body is read and closed.
		resp.Body = &countedBody{ReadCloser: resp.Body, c: c}
		c.inflight.Add(1)
	}
	return resp, err
}

type countedBody struct {
	io.ReadCloser
	c    *countingTransport
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() { b.c.inflight.Add(-1) })
	return b.ReadCloser.Close()
}
