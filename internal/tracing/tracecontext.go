package tracing

import (
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// A W3C trace context (traceparent and tracestate) is bytes a sender chose:
// it is read here, by the W3C Trace Context rules, strictly, and what is
// kept of it is bounded, whether it comes from an HTTP request or from a
// JetStream message's headers.

// Limits of what is kept of a tracestate: the W3C's (at most 32
// list-members; propagate at least 512 characters, and when truncating,
// drop members over 128 characters first, then from the end).
const (
	maxTraceStateMembers = 32
	maxTraceStateLen     = 512
	longTraceStateMember = 128
)

// traceparentLen is the length of a version 00 traceparent:
// version-traceid-parentid-flags, 2+1+32+1+16+1+2.
const traceparentLen = 55

// parseTraceParent reads one traceparent value by the W3C rules: lowercase
// hex fields of their exact lengths, a trace id and a parent id that are
// not all zeros, a version other than ff, and for version 00 nothing after
// the flags (a later version may append fields after a dash; they are
// ignored). Only the sampled flag is kept. ok is false for anything else.
func parseTraceParent(v string) (cfg trace.SpanContextConfig, ok bool) {
	if len(v) < traceparentLen || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return cfg, false
	}
	version := v[0:2]
	if !lowerHex(version) || version == "ff" {
		return cfg, false
	}
	if version == "00" && len(v) != traceparentLen {
		return cfg, false
	}
	if len(v) > traceparentLen && v[traceparentLen] != '-' {
		return cfg, false
	}
	if !lowerHex(v[3:35]) || !lowerHex(v[36:52]) || !lowerHex(v[53:55]) {
		return cfg, false
	}
	tid, err := trace.TraceIDFromHex(v[3:35])
	if err != nil { // all zeros
		return cfg, false
	}
	sid, err := trace.SpanIDFromHex(v[36:52])
	if err != nil {
		return cfg, false
	}
	var flags trace.TraceFlags
	if hexDigit(v[54])&1 == 1 {
		flags = trace.FlagsSampled
	}
	return trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags}, true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func hexDigit(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// capTraceState is the tracestate that values (the header's fields, in
// order, as HTTP combines repeated fields) hold, cut to the W3C limits:
// members past the 32nd are dropped; then, while the list is longer than
// 512 characters, members over 128 characters go first, then members from
// the end. A list that is not valid W3C tracestate (a malformed member, a
// duplicate key) is dropped whole, as the W3C asks: the empty TraceState.
// Work is bounded by the input's length; at most 32 members are kept in
// memory.
func capTraceState(values ...string) trace.TraceState {
	var members [maxTraceStateMembers]string
	n := 0
collect:
	for _, v := range values {
		for v != "" && n < len(members) {
			var m string
			m, v, _ = strings.Cut(v, ",")
			if m = strings.Trim(m, " \t"); m != "" {
				members[n] = m
				n++
			}
			if n == len(members) {
				break collect
			}
		}
	}
	kept := members[:n]
	if listLen(kept) > maxTraceStateLen {
		short := kept[:0]
		for _, m := range kept {
			if len(m) <= longTraceStateMember {
				short = append(short, m)
			}
		}
		kept = short
		for listLen(kept) > maxTraceStateLen {
			kept = kept[:len(kept)-1]
		}
	}
	ts, err := trace.ParseTraceState(strings.Join(kept, ","))
	if err != nil {
		return trace.TraceState{}
	}
	return ts
}

// listLen is the length of members joined with commas.
func listLen(members []string) int {
	n := max(len(members)-1, 0)
	for _, m := range members {
		n += len(m)
	}
	return n
}

// remoteContext is the span context a traceparent and tracestate (its header
// fields) name, marked remote, invalid when the traceparent is missing or
// malformed: a tracestate alone names nothing.
func remoteContext(traceparent string, tracestates ...string) trace.SpanContext {
	cfg, ok := parseTraceParent(traceparent)
	if !ok {
		return trace.SpanContext{}
	}
	cfg.TraceState = capTraceState(tracestates...)
	cfg.Remote = true
	return trace.NewSpanContext(cfg)
}
