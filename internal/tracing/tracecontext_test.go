package tracing

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// loopback is 127.0.0.0/8 as a trusted-senders list.
var loopback = []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)}}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// TestParseTraceParent: only a traceparent of the W3C format is read;
// anything else names no parent.
func TestParseTraceParent(t *testing.T) {
	for _, tc := range []struct {
		name, v string
		ok      bool
		sampled bool
	}{
		{"sampled", "00-" + callerTrace + "-" + callerSpan + "-01", true, true},
		{"not sampled", "00-" + callerTrace + "-" + callerSpan + "-00", true, false},
		{"other flags dropped", "00-" + callerTrace + "-" + callerSpan + "-fe", true, false},
		{"later version with more fields", "cc-" + callerTrace + "-" + callerSpan + "-01-what-comes-next", true, true},
		{"later version exact", "01-" + callerTrace + "-" + callerSpan + "-01", true, true},
		{"version 00 with more", "00-" + callerTrace + "-" + callerSpan + "-01-x", false, false},
		{"version ff", "ff-" + callerTrace + "-" + callerSpan + "-01", false, false},
		{"later version glued", "01-" + callerTrace + "-" + callerSpan + "-01x", false, false},
		{"uppercase", "00-" + strings.ToUpper(callerTrace) + "-" + callerSpan + "-01", false, false},
		{"zero trace id", "00-" + strings.Repeat("0", 32) + "-" + callerSpan + "-01", false, false},
		{"zero span id", "00-" + callerTrace + "-" + strings.Repeat("0", 16) + "-01", false, false},
		{"short", "00-" + callerTrace[:31] + "-" + callerSpan + "-01", false, false},
		{"not hex", "00-" + callerTrace[:31] + "g-" + callerSpan + "-01", false, false},
		{"spaces", " 00-" + callerTrace + "-" + callerSpan + "-01", false, false},
		{"bad flags", "00-" + callerTrace + "-" + callerSpan + "-0x", false, false},
		{"empty", "", false, false},
	} {
		cfg, ok := parseTraceParent(tc.v)
		if ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if ok && (cfg.TraceID.String() != callerTrace || cfg.SpanID.String() != callerSpan || cfg.TraceFlags.IsSampled() != tc.sampled) {
			t.Errorf("%s: %s/%s sampled %v", tc.name, cfg.TraceID, cfg.SpanID, cfg.TraceFlags.IsSampled())
		}
	}
}

// TestCapTraceState: a tracestate is cut to 32 members and 512 characters
// by the W3C rules (long members first, then from the end), and an invalid
// one is dropped whole.
func TestCapTraceState(t *testing.T) {
	long := func(k string) string { return k + "=" + strings.Repeat("x", 200) }
	var many, mixed []string
	for i := range 40 {
		many = append(many, "k"+itoa(i)+"=v")
		mixed = append(mixed, "s"+itoa(i)+"=v", long("l"+itoa(i)))
	}
	var fit, wide []string
	for i := range 40 {
		fit = append(fit, "key"+itoa(100+i)+"=vvvvv")           // 12 characters: 32 fit in 512
		wide = append(wide, "key"+itoa(100+i)+"=vvvvvvvvvvvvv") // 20 characters: 24 fit in 512
	}
	for _, tc := range []struct {
		name   string
		values []string
		want   string
	}{
		{"kept as is", []string{"a=1,b=2"}, "a=1,b=2"},
		{"fields joined, blanks and spaces dropped", []string{" a=1 , ,", "b=2"}, "a=1,b=2"},
		{"past the 32nd member", []string{strings.Join(many, ",")}, strings.Join(many[:32], ",")},
		{"32 members within 512 characters", []string{strings.Join(fit, ",")}, strings.Join(fit[:32], ",")},
		{"too long: members over 128 characters go first", []string{strings.Join(mixed, ",")}, strings.Join(every2(mixed[:32]), ",")},
		{"too long: then members from the end", []string{strings.Join(wide, ",")}, strings.Join(wide[:24], ",")},
		{"a long member kept while the list fits", []string{"a=1," + long("b")}, "a=1," + long("b")},
		{"too long, all members long", []string{long("a") + "," + long("b") + "," + long("c")}, ""},
		{"duplicate key", []string{"a=1,a=2"}, ""},
		{"malformed member", []string{"a=1,no-equals"}, ""},
		{"bad value", []string{"a=1,b=x=y"}, ""},
		{"empty", nil, ""},
	} {
		ts := capTraceState(tc.values...)
		if got := ts.String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if ts.Len() > maxTraceStateMembers || len(ts.String()) > maxTraceStateLen {
			t.Errorf("%s: %d members, %d characters", tc.name, ts.Len(), len(ts.String()))
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func every2(s []string) []string {
	var out []string
	for i := 0; i < len(s); i += 2 {
		out = append(out, s[i])
	}
	return out
}

// TestDeliverySpanParent: a request's span continues its traceparent only
// once verified and only from a trusted sender; a request answered before
// it was verified, or from anyone else, starts a trace of its own, without
// the caller's tracestate.
func TestDeliverySpanParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer(Scope)
	req := httptest.NewRequest(http.MethodPost, "/webhooks/crawl", nil)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	req.Header.Set("tracestate", "a=1,"+strings.Repeat("b", 600)+"=2")
	twice := req.Clone(req.Context())
	twice.Header.Add("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")

	for _, tc := range []struct {
		name     string
		req      *http.Request
		trusted  bool
		verified bool
		remote   string
		adopted  bool
	}{
		{"refused, trusted sender", req, true, false, "127.0.0.1", false},
		{"verified, no trusted senders", req, false, true, "127.0.0.1", false},
		{"verified, sender not trusted", req, true, true, "192.0.2.1", false},
		{"verified, no address", req, true, true, "", false},
		{"verified, two traceparents", twice, true, true, "127.0.0.1", false},
		{"verified, trusted sender", req, true, true, "127.0.0.1", true},
		{"verified, trusted sender over IPv6-mapped", req, true, true, "::ffff:127.0.0.1", true},
	} {
		exp.Reset()
		d := Deliveries{Tracer: tr}
		if tc.trusted {
			d.TrustedSenders = loopback
		}
		r, ds := StartDelivery(d, tc.req, "/webhooks/crawl")
		if tc.verified {
			r = Verified(r, tc.remote)
			if tp, ts := Parent(r.Context()); tc.adopted != strings.Contains(tp, callerTrace) || tc.adopted != (ts == "a=1") {
				t.Errorf("%s: carried traceparent %q tracestate %q", tc.name, tp, ts)
			}
		}
		EndDelivery(ds, "refused", http.StatusUnauthorized)
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("%s: %d spans", tc.name, len(spans))
		}
		s := spans[0]
		adopted := s.Parent.IsValid() && s.Parent.TraceID().String() == callerTrace && s.Parent.SpanID().String() == callerSpan &&
			s.SpanContext.TraceID().String() == callerTrace
		if adopted != tc.adopted {
			t.Errorf("%s: span in trace %s under %v, want adopted %v", tc.name, s.SpanContext.TraceID(), s.Parent, tc.adopted)
		}
		if !tc.adopted && (s.Parent.IsValid() || s.SpanContext.TraceID().String() == callerTrace || s.SpanContext.TraceState().Len() != 0) {
			t.Errorf("%s: caller's context kept: trace %s parent %v state %q", tc.name, s.SpanContext.TraceID(), s.Parent, s.SpanContext.TraceState())
		}
		if tc.adopted && s.SpanContext.TraceState().String() != "a=1" {
			t.Errorf("%s: tracestate %q, want the capped a=1", tc.name, s.SpanContext.TraceState())
		}
		if s.StartTime.After(s.EndTime) || s.StartTime.IsZero() {
			t.Errorf("%s: span from %v to %v", tc.name, s.StartTime, s.EndTime)
		}
	}
}
