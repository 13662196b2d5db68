package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The caller's trace context of these tests: a sampled traceparent and a
// valid tracestate of 32 members, ~7 KB: 16 members of ~430 characters
// between 16 short ones, which are what a capped tracestate keeps.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

func callerHeaders() (h http.Header, capped string) {
	var members, short []string
	for i := range 16 {
		s := fmt.Sprintf("s%d=v%d", i, i)
		short = append(short, s)
		members = append(members, s, fmt.Sprintf("caller%d%s=%s%s", i, strings.Repeat("k", 190), callerTrace, strings.Repeat("x", 200)))
	}
	return http.Header{
		"Traceparent": {"00-" + callerTrace + "-" + callerSpan + "-01"},
		"Tracestate":  {strings.Join(members, ",")},
	}, strings.Join(short, ",")
}

// tracedReceiver is the real receiver on an embedded JetStream, tracing
// with sampler into an in-memory exporter, the sender trusted or not.
func tracedReceiver(t *testing.T, sampler sdktrace.Sampler, trusted string) (url string, p *pipeline) {
	t.Helper()
	natsURL := streamtest.Start(t)
	p = &pipeline{spans: tracetest.NewInMemoryExporter()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(p.spans), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	env := map[string]string{}
	if trusted != "" {
		env["RECEIVER_TRACE_TRUSTED_SENDERS"] = trusted
	}
	url = startReceiver(t, natsURL, env, tracing.NewProvider(tp))
	_, p.js = streamtest.Connect(t, natsURL)
	return url, p
}

// callerIn reports where, if anywhere, span s holds the caller's trace id
// or tracestate.
func callerIn(s tracetest.SpanStub) string {
	switch {
	case s.SpanContext.TraceID().String() == callerTrace:
		return "trace id"
	case s.Parent.IsValid():
		return "parent " + s.Parent.TraceID().String()
	case s.SpanContext.TraceState().Len() != 0:
		return "tracestate"
	case len(s.Links) != 0:
		return "links"
	}
	for _, a := range s.Attributes {
		if strings.Contains(a.Value.String(), callerTrace) {
			return "attribute " + string(a.Key)
		}
	}
	return ""
}

// TestRefusedRequestsSteerNothing: requests with a bad signature and the
// caller's traceparent (sampled) and a 7 KB tracestate decide nothing that
// is exported, even from a trusted sender: at a sampling ratio of 0 none
// of 100 exports a span, and sampling everything each has a span of a new
// trace that holds nothing of the caller's context.
func TestRefusedRequestsSteerNothing(t *testing.T) {
	h, _ := callerHeaders()
	h.Set("X-Service-Signature", "sha256="+strings.Repeat("ab", 32))
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
		want    int
	}{
		// OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0
		{"ratio 0", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)), 0},
		// the default, parentbased_always_on
		{"always on", sdktrace.ParentBased(sdktrace.AlwaysSample()), 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, p := tracedReceiver(t, tc.sampler, "127.0.0.1")
			for range 100 {
				body := pageBody(uuid.NewString(), uuid.NewString(), "page")
				if status, answer := post(t, url, body, h); status != http.StatusUnauthorized {
					t.Fatalf("bad signature answered %d %s", status, answer)
				}
			}
			// Spans are exported synchronously, before the answer.
			spans := p.spans.GetSpans()
			if len(spans) != tc.want {
				t.Errorf("%d spans exported, want %d", len(spans), tc.want)
			}
			for _, s := range spans {
				if where := callerIn(s); where != "" {
					t.Fatalf("refused request's span %s carries the caller's %s", s.Name, where)
				}
				if attr(s, "http.response.status_code") != "401" {
					t.Errorf("span %s status %q, want 401", s.Name, attr(s, "http.response.status_code"))
				}
			}
		})
	}
}

// TestTraceContextTrust: a signed delivery continues its sender's trace
// only when the sender is trusted. Untrusted, its span starts a new trace
// and the stored message's headers hold that trace, none of the sender's
// traceparent or tracestate; trusted, its span is the traceparent's child
// and the stored message carries the sender's trace with the tracestate
// cut to the W3C limits.
func TestTraceContextTrust(t *testing.T) {
	h, capped := callerHeaders()
	for _, tc := range []struct {
		name, trusted string
		adopted       bool
	}{
		{"no trusted senders", "", false},
		{"sender not in the list", "192.0.2.0/24,2001:db8::/32", false},
		{"trusted sender", "127.0.0.0/8", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, p := tracedReceiver(t, sdktrace.ParentBased(sdktrace.AlwaysSample()), tc.trusted)
			webhook := uuid.NewString()
			body := pageBody(uuid.NewString(), webhook, "page")
			hh := h.Clone()
			hh.Set("X-Service-Signature", sign(body))
			if status, answer := post(t, url, body, hh); status != http.StatusOK {
				t.Fatalf("signed delivery answered %d %s", status, answer)
			}
			recv := p.spanNamed(t, "POST /webhooks/crawl", "crawlhouse.webhook_id", webhook)
			msg := storedMessage(t, p.js, webhook)
			tp, ts := msg.Header.Get(delivery.HeaderTraceParent), msg.Header.Get(delivery.HeaderTraceState)
			if want := "00-" + recv.SpanContext.TraceID().String() + "-" + recv.SpanContext.SpanID().String() + "-01"; tp != want {
				t.Errorf("message traceparent %q, want the delivery span's %q", tp, want)
			}
			if !tc.adopted {
				if where := callerIn(recv); where != "" {
					t.Errorf("untrusted sender's span carries the caller's %s", where)
				}
				if strings.Contains(tp, callerTrace) || len(msg.Header.Values(delivery.HeaderTraceState)) != 0 {
					t.Errorf("untrusted sender's context stored: traceparent %q tracestate %q", tp, ts)
				}
				return
			}
			if recv.SpanContext.TraceID().String() != callerTrace || recv.Parent.SpanID().String() != callerSpan || !recv.Parent.IsRemote() {
				t.Errorf("trusted sender's span in trace %s under %s, want the caller's %s under %s",
					recv.SpanContext.TraceID(), recv.Parent.SpanID(), callerTrace, callerSpan)
			}
			if ts != capped || recv.SpanContext.TraceState().String() != capped {
				t.Errorf("tracestate stored %q, span %q; want the capped %q", ts, recv.SpanContext.TraceState(), capped)
			}
		})
	}
}
