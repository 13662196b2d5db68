package tracing_test

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
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

const secret = "tracing-test-secret"

// pipeline is the real receiver and the real sink in process, on an
// embedded JetStream and a database of the shared ClickHouse, both tracing
// into one in-memory exporter.
type pipeline struct {
	url   string
	js    jetstream.JetStream
	spans *tracetest.InMemoryExporter
	count func(query string, args ...any) uint64
	exec  func(query string) error
	// sinkEnv is the sink's environment (for one-off commands).
	sinkEnv map[string]string
}

func startPipeline(t *testing.T, traced bool, sinkExtra map[string]string) *pipeline {
	t.Helper()
	natsURL := streamtest.Start(t)
	chAddr, db := clickhousetest.NewDatabase(t)
	conn := clickhousetest.Open(t, db)
	p := &pipeline{spans: tracetest.NewInMemoryExporter()}
	p.count = func(q string, args ...any) uint64 { return clickhousetest.TryCount(conn, q, args...) }
	p.exec = func(q string) error { return conn.Exec(context.Background(), q) }
	var prov *tracing.Provider
	if traced {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(p.spans))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		prov = tracing.NewProvider(tp)
	}

	// The test client is a trusted sender: its traceparent is continued
	// (TestTraceContextTrust covers the senders that are not).
	p.url = startReceiver(t, natsURL, map[string]string{"RECEIVER_TRACE_TRUSTED_SENDERS": "127.0.0.1"}, prov)

	sinkEnv := map[string]string{
		"NATS_URL":            natsURL,
		"CLICKHOUSE_ADDR":     chAddr,
		"CLICKHOUSE_DATABASE": db,
		"SINK_LISTEN":         "127.0.0.1:0",
		"SINK_BATCH_WAIT":     "100ms",
		"LOG_LEVEL":           "warn",
	}
	maps.Copy(sinkEnv, sinkExtra)
	p.sinkEnv = sinkEnv
	sctx, scancel := context.WithCancel(context.Background())
	sready := make(chan string, 1)
	sdone := make(chan error, 1)
	go func() {
		sdone <- sinkcmd.RunWithOptions(sctx, []string{"sink"}, func(k string) string { return sinkEnv[k] }, io.Discard, io.Discard,
			sinkcmd.Options{Ready: func(a string) { sready <- a }, Tracing: prov})
	}()
	select {
	case <-sready:
	case err := <-sdone:
		scancel()
		t.Fatalf("sink exited: %v", err)
	}
	t.Cleanup(func() {
		scancel()
		if err := <-sdone; err != nil {
			t.Errorf("sink: %v", err)
		}
	})

	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if p.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return p
}

// startReceiver runs the real receiver in process on the JetStream at
// natsURL, with the test secret and extra over its environment, tracing
// into prov (nil: off), and returns its webhook URL once it is ready.
func startReceiver(t *testing.T, natsURL string, extra map[string]string, prov *tracing.Provider) string {
	t.Helper()
	env := map[string]string{
		"RECEIVER_LISTEN": "127.0.0.1:0",
		"WEBHOOK_SECRETS": secret,
		"NATS_URL":        natsURL,
		"LOG_LEVEL":       "warn",
	}
	maps.Copy(env, extra)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan receivercmd.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- receivercmd.RunWithOptions(ctx, []string{"receiver"}, func(k string) string { return env[k] }, io.Discard, io.Discard,
			receivercmd.Options{Ready: func(a receivercmd.Addrs) { ready <- a }, Tracing: prov})
	}()
	var addrs receivercmd.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("receiver exited: %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "receiver ready", func() bool {
		resp, err := http.Get("http://" + addrs.HTTP + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return "http://" + addrs.HTTP + "/webhooks/crawl"
}

// deliver POSTs a signed page delivery, with traceparent when it is set,
// and fails unless it is answered 200.
func (p *pipeline) deliver(t *testing.T, body []byte, traceparent string) {
	t.Helper()
	h := http.Header{"X-Service-Signature": {sign(body)}}
	if traceparent != "" {
		h.Set("traceparent", traceparent)
	}
	if status, answer := post(t, p.url, body, h); status != http.StatusOK {
		t.Fatalf("delivery answered %d %s", status, answer)
	}
}

// sign is body's signature with the test secret, as a signature header
// holds it.
func sign(body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// post POSTs body as JSON to url with the headers h and returns the status
// code and the answer.
func post(t *testing.T, url string, body []byte, h http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, answer
}

// archived waits for the page of crawl in ClickHouse.
func (p *pipeline) archived(t *testing.T, crawl string) {
	t.Helper()
	waitFor(t, "the page's row", func() bool {
		return p.count("SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl) == 1
	})
}

// message is the stored message of a webhookId, read from the stream.
func (p *pipeline) message(t *testing.T, webhookID string) *jetstream.RawStreamMsg {
	t.Helper()
	return storedMessage(t, p.js, webhookID)
}

// storedMessage is the message of a webhookId in the events stream.
func storedMessage(t *testing.T, js jetstream.JetStream, webhookID string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(context.Background(), "CRAWL_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err == nil && m.Header.Get(delivery.HeaderMsgID) == webhookID {
			return m
		}
	}
	t.Fatalf("no message of webhook %s in the stream", webhookID)
	return nil
}

func pageBody(crawl, webhook, markdown string) []byte {
	return pageAt(crawl, webhook, "https://site.test/a", markdown)
}

func pageAt(crawl, webhook, url, markdown string) []byte {
	return fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"html":"<p>x</p>","metadata":{"title":"T","sourceURL":%q,"url":%q,"statusCode":200}}]}`,
		crawl, webhook, markdown, url, url)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// spanNamed waits for the one ended span named name whose attribute key is
// value.
func (p *pipeline) spanNamed(t *testing.T, name, key, value string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	waitFor(t, "span "+name, func() bool {
		found = found[:0]
		for _, s := range p.spans.GetSpans() {
			if s.Name != name {
				continue
			}
			if key == "" || attr(s, key) == value {
				found = append(found, s)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		t.Fatalf("%d spans %s with %s=%s, want 1", len(found), name, key, value)
	}
	return found[0]
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// TestOneDeliveryOneTrace: a delivery through the real receiver, JetStream
// and sink into ClickHouse is one trace: the HTTP span (outcome, status
// code, ids; never the signature or the body), its publish span, the trace
// context in the stored message's headers, and the ClickHouse insert span
// in the same trace, a child of the delivery's span and linked to it. A
// sender's traceparent is continued: the delivery's span is its child.
func TestOneDeliveryOneTrace(t *testing.T) {
	p := startPipeline(t, true, nil)

	t.Run("new trace", func(t *testing.T) {
		crawl, webhook := uuid.NewString(), uuid.NewString()
		markdown := "secret-looking page text " + uuid.NewString()
		p.deliver(t, pageBody(crawl, webhook, markdown), "")
		p.archived(t, crawl)

		recv := p.spanNamed(t, "POST /webhooks/crawl", "crawlhouse.webhook_id", webhook)
		if recv.SpanKind != trace.SpanKindServer || recv.Parent.IsValid() {
			t.Errorf("delivery span: kind %v, parent %v; want a server span starting the trace", recv.SpanKind, recv.Parent)
		}
		for k, want := range map[string]string{
			"crawlhouse.outcome":        "accepted",
			"http.response.status_code": "200",
			"crawlhouse.crawl_id":       crawl,
			"crawlhouse.event_type":     "crawl.page",
		} {
			if got := attr(recv, k); got != want {
				t.Errorf("delivery span %s = %q, want %q", k, got, want)
			}
		}
		var events []string
		for _, e := range recv.Events {
			events = append(events, e.Name)
		}
		if strings.Join(events, ",") != "signature verified,payload validated" {
			t.Errorf("delivery span events %v, want signature verified, payload validated", events)
		}
		for _, a := range recv.Attributes {
			v := a.Value.String()
			if strings.Contains(v, markdown) || strings.Contains(v, "sha256=") || strings.Contains(v, secret) {
				t.Errorf("delivery span attribute %s carries the body or the signature: %q", a.Key, v)
			}
		}

		pub := p.spanNamed(t, "publish crawl.events.crawl.page", "", "")
		if pub.Parent.SpanID() != recv.SpanContext.SpanID() || pub.SpanContext.TraceID() != recv.SpanContext.TraceID() {
			t.Errorf("publish span is not the delivery span's child")
		}
		if attr(pub, "crawlhouse.duplicate") != "false" {
			t.Errorf("publish span duplicate = %q", attr(pub, "crawlhouse.duplicate"))
		}

		msg := p.message(t, webhook)
		sc := tracing.FromParent(msg.Header.Get(delivery.HeaderTraceParent), msg.Header.Get(delivery.HeaderTraceState))
		if sc.TraceID() != recv.SpanContext.TraceID() || sc.SpanID() != recv.SpanContext.SpanID() {
			t.Errorf("message traceparent %q does not name the delivery span %s/%s",
				msg.Header.Get(delivery.HeaderTraceParent), recv.SpanContext.TraceID(), recv.SpanContext.SpanID())
		}

		ins := insertSpanOf(t, p, recv.SpanContext)
		if ins.SpanContext.TraceID() != recv.SpanContext.TraceID() || ins.Parent.SpanID() != recv.SpanContext.SpanID() {
			t.Errorf("insert span is in trace %s under %s; want trace %s under the delivery span %s",
				ins.SpanContext.TraceID(), ins.Parent.SpanID(), recv.SpanContext.TraceID(), recv.SpanContext.SpanID())
		}
		if attr(ins, "crawlhouse.outcome") != "committed" || attr(ins, "db.system.name") != "clickhouse" {
			t.Errorf("insert span outcome %q system %q", attr(ins, "crawlhouse.outcome"), attr(ins, "db.system.name"))
		}
	})

	t.Run("sender's traceparent continued", func(t *testing.T) {
		crawl, webhook := uuid.NewString(), uuid.NewString()
		const senderTrace, senderSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		p.deliver(t, pageBody(crawl, webhook, "page"), "00-"+senderTrace+"-"+senderSpan+"-01")
		p.archived(t, crawl)

		recv := p.spanNamed(t, "POST /webhooks/crawl", "crawlhouse.webhook_id", webhook)
		if recv.SpanContext.TraceID().String() != senderTrace || recv.Parent.SpanID().String() != senderSpan || !recv.Parent.IsRemote() {
			t.Errorf("delivery span in trace %s under %s; want the sender's trace %s under its span %s",
				recv.SpanContext.TraceID(), recv.Parent.SpanID(), senderTrace, senderSpan)
		}
		ins := insertSpanOf(t, p, recv.SpanContext)
		if ins.SpanContext.TraceID().String() != senderTrace {
			t.Errorf("insert span in trace %s, want the sender's %s", ins.SpanContext.TraceID(), senderTrace)
		}
	})
}

// insertSpanOf waits for the insert span that committed the delivery of
// span sc (linked to it); a refused attempt has a span of its own.
func insertSpanOf(t *testing.T, p *pipeline, sc trace.SpanContext) tracetest.SpanStub {
	t.Helper()
	var ins tracetest.SpanStub
	waitFor(t, "the insert span linked to the delivery", func() bool {
		for _, s := range p.spans.GetSpans() {
			if s.Name != "clickhouse insert" || attr(s, "crawlhouse.outcome") != "committed" {
				continue
			}
			for _, l := range s.Links {
				if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
					ins = s
					return true
				}
			}
		}
		return false
	})
	return ins
}

// TestTracingOffCarriesNothing: with no OTEL_* variable set the pipeline
// archives as before, and a sender's traceparent is not stored in the
// message (tracing off is not half on).
func TestTracingOffCarriesNothing(t *testing.T) {
	p := startPipeline(t, false, nil)
	crawl, webhook := uuid.NewString(), uuid.NewString()
	p.deliver(t, pageBody(crawl, webhook, "page"), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	p.archived(t, crawl)
	msg := p.message(t, webhook)
	if v := msg.Header.Values(delivery.HeaderTraceParent); len(v) != 0 {
		t.Errorf("tracing off, message carries traceparent %q", v)
	}
}

// TestRedriveKeepsTraceContext: a delivery ClickHouse refuses is
// dead-lettered with its trace context; redriven, it is inserted by a span
// linked to the delivery's span in the receiver, as if it had never left.
func TestRedriveKeepsTraceContext(t *testing.T) {
	p := startPipeline(t, true, map[string]string{"SINK_MAX_DELIVER": "1"})
	// A first page: the sink has migrated once it is archived.
	first := uuid.NewString()
	p.deliver(t, pageBody(first, uuid.NewString(), "page"), "")
	p.archived(t, first)
	if err := p.exec("ALTER TABLE pages ADD CONSTRAINT no_refused CHECK url != 'https://site.test/refused'"); err != nil {
		t.Fatal(err)
	}
	crawl, webhook := uuid.NewString(), uuid.NewString()
	p.deliver(t, pageAt(crawl, webhook, "https://site.test/refused", "page"), "")
	recv := p.spanNamed(t, "POST /webhooks/crawl", "crawlhouse.webhook_id", webhook)

	dlq, err := p.js.Stream(context.Background(), "CRAWL_DLQ")
	waitFor(t, "the dead letter", func() bool {
		if err != nil {
			dlq, err = p.js.Stream(context.Background(), "CRAWL_DLQ")
			return false
		}
		info, ierr := dlq.Info(context.Background())
		return ierr == nil && info.State.Msgs == 1
	})
	info, _ := dlq.Info(context.Background())
	dl, err := dlq.GetMsg(context.Background(), info.State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if sc := tracing.FromParent(dl.Header.Get(delivery.HeaderTraceParent), ""); sc.SpanID() != recv.SpanContext.SpanID() {
		t.Fatalf("dead letter traceparent %q, want the delivery span %s", dl.Header.Get(delivery.HeaderTraceParent), recv.SpanContext.SpanID())
	}

	if err := p.exec("ALTER TABLE pages DROP CONSTRAINT no_refused"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := sinkcmd.Run(context.Background(), []string{"sink", "redrive"}, func(k string) string { return p.sinkEnv[k] }, &out, &out); err != nil {
		t.Fatalf("redrive: %v\n%s", err, out.String())
	}
	p.archived(t, crawl)
	ins := insertSpanOf(t, p, recv.SpanContext)
	if ins.SpanContext.TraceID() != recv.SpanContext.TraceID() || attr(ins, "crawlhouse.outcome") != "committed" {
		t.Errorf("redriven insert span: trace %s outcome %q; want the delivery's trace %s, committed",
			ins.SpanContext.TraceID(), attr(ins, "crawlhouse.outcome"), recv.SpanContext.TraceID())
	}
}
