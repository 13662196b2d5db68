package delivery

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/nats-io/nats.go"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixturePage is the crawl.page fixture and its validated head.
func fixturePage(t *testing.T) ([]byte, events.Head) {
	t.Helper()
	body := readFixture(t, "crawl-page.json")
	h, err := events.Validate(body)
	if err != nil {
		t.Fatal(err)
	}
	return body, h
}

// TestEnvelopeRoundTrip: headers written by Header are read back by
// Decode; a compressed body opens to the original.
func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	body, h := fixturePage(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	env := NewEnvelope("crawl.events", h, body, at)
	env.Body, env.Encoding = compress(body), EncodingZstd
	if env.Subject != "crawl.events.crawl.page" {
		t.Errorf("subject %s", env.Subject)
	}
	back, err := Decode(env.Subject, env.Header(), env.Body)
	if err != nil {
		t.Fatal(err)
	}
	if back.WebhookID != h.WebhookID || back.CrawlID != h.CrawlID || back.Type != h.Type || !back.ReceivedAt.Equal(at) || back.Size != len(body) {
		t.Errorf("round trip: %+v", back)
	}
	got, err := NewBodies(nil, "unused").Open(context.Background(), back)
	if err != nil || !bytes.Equal(got, body) {
		t.Errorf("decoded body differs: %v", err)
	}
	if _, err := Decode("s", nats.Header{}, nil); err == nil {
		t.Error("an envelope without Nats-Msg-Id parsed")
	}
}

// TestEnvelopeHeaders: a body carried as received travels with its id and
// time alone, and decodes to its size; a compressed or stored-aside body
// also names its crawl, type and size, which its length does not tell.
func TestEnvelopeHeaders(t *testing.T) {
	t.Parallel()
	body, h := fixturePage(t)
	keys := func(h nats.Header) []string {
		var k []string
		for key := range h {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	plain := NewEnvelope("crawl.events", h, body, time.Now())
	if got, want := keys(plain.Header()), []string{HeaderReceivedAt, HeaderMsgID}; !slices.Equal(got, want) {
		t.Errorf("a body as received: headers %v, want %v", got, want)
	}
	back, err := Decode(plain.Subject, plain.Header(), plain.Body)
	if err != nil {
		t.Fatal(err)
	}
	if back.Size != len(body) || back.CrawlID != "" || back.Type != "" {
		t.Errorf("a body as received decoded as size %d, crawl %q, type %q: want %d and the rest from the body", back.Size, back.CrawlID, back.Type, len(body))
	}
	for name, env := range map[string]*Envelope{
		"compressed":   {WebhookID: "w1", CrawlID: "c1", Type: "crawl.page", Size: 5000, Encoding: EncodingZstd, Body: []byte("z")},
		"stored aside": {WebhookID: "w1", CrawlID: "c1", Type: "crawl.page", Size: 5000, BodyRef: "w1"},
	} {
		back, err := Decode("crawl.events.crawl.page", env.Header(), env.Body)
		if err != nil {
			t.Fatal(err)
		}
		if back.CrawlID != "c1" || back.Type != "crawl.page" || back.Size != 5000 || back.Encoding != env.Encoding || back.BodyRef != env.BodyRef {
			t.Errorf("%s: decoded %+v", name, back)
		}
	}
}

// TestDecodeRedriven: a redriven message decodes as the delivery it was
// redriven for, and its webhook id is logged as that delivery's.
func TestDecodeRedriven(t *testing.T) {
	t.Parallel()
	h := nats.Header{
		HeaderMsgID:     {"w1.redrive.CRAWL_DLQ.7"},
		HeaderRedriveOf: {"w1"},
		HeaderCrawlID:   {"c1"},
	}
	env, err := Decode("crawl.events.crawl.page", h, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if env.WebhookID != "w1" || env.CrawlID != "c1" {
		t.Errorf("redriven message decoded as %+v", env)
	}
	if got := WebhookID(h); got != "w1" {
		t.Errorf("WebhookID = %q, want w1", got)
	}
	if h.Get(HeaderMsgID) != "w1.redrive.CRAWL_DLQ.7" {
		t.Error("Decode changed the message's own headers")
	}
}

// TestSize: a message counts for the delivery it carries as received, and
// never for less than the bytes it holds.
func TestSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header string
		data   int
		want   int
	}{
		{"no header", "", 10, 10},
		{"compressed", "1000", 10, 1000},
		{"header below data", "3", 10, 10},
		{"garbage header", "x", 10, 10},
		{"negative header", "-5", 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := nats.Header{}
			if tc.header != "" {
				h.Set(HeaderBodySize, tc.header)
			}
			if got := Size(h, make([]byte, tc.data)); got != tc.want {
				t.Errorf("Size = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestEnvelopeTraceContext: the W3C trace context of the delivery's span
// goes into the message headers and back; without one (tracing off) the
// message has no such header; a redriven message keeps it.
func TestEnvelopeTraceContext(t *testing.T) {
	t.Parallel()
	const tp, ts = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=x"
	env := &Envelope{Subject: "crawl.events.crawl.page", WebhookID: "w1", TraceParent: tp, TraceState: ts}
	h := env.Header()
	if h.Get(HeaderTraceParent) != tp || h.Get(HeaderTraceState) != ts {
		t.Errorf("headers %v, want traceparent and tracestate", h)
	}
	back, err := Decode(env.Subject, h, nil)
	if err != nil || back.TraceParent != tp || back.TraceState != ts {
		t.Errorf("decoded %+v, %v", back, err)
	}
	h.Set(HeaderRedriveOf, "w1")
	h.Set(HeaderMsgID, "w1.redrive.CRAWL_DLQ.3")
	if back, err := Decode(env.Subject, h, nil); err != nil || back.TraceParent != tp {
		t.Errorf("redriven: %+v, %v", back, err)
	}
	off := (&Envelope{WebhookID: "w2"}).Header()
	if _, ok := off[HeaderTraceParent]; ok {
		t.Errorf("no trace context, headers %v", off)
	}
	if _, ok := off[HeaderTraceState]; ok {
		t.Errorf("no trace context, headers %v", off)
	}
}
