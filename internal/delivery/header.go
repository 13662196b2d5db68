package delivery

import (
	"strconv"

	"github.com/nats-io/nats.go"
)

// Headers of a delivery's message. Nats-Msg-Id is JetStream's own
// deduplication header (the webhookId); the others tell the sink what the
// message holds without decoding the body.
const (
	HeaderMsgID      = "Nats-Msg-Id"
	HeaderCrawlID    = "Crawlhouse-Crawl-Id"
	HeaderEventType  = "Crawlhouse-Event-Type"
	HeaderReceivedAt = "Crawlhouse-Received-At"
	// HeaderEncoding is "zstd" when the body is compressed, absent when it
	// is the delivery's bytes as received.
	HeaderEncoding = "Content-Encoding"
	// HeaderBodyRef names the object (in the stream's object store) that
	// holds the body when it was too large for one message even compressed;
	// the message body is then empty.
	HeaderBodyRef = "Crawlhouse-Body-Ref"
	// HeaderBodySize is the size of the delivery as received, in bytes.
	HeaderBodySize = "Crawlhouse-Body-Size"
	// HeaderTraceParent and HeaderTraceState are the W3C trace context of
	// the delivery's span in the receiver (internal/tracing), set only when
	// tracing is on: the sink links its insert to it. Dead-lettering and
	// redrive copy them with the other headers.
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// EncodingZstd marks a zstd-compressed body.
const EncodingZstd = "zstd"

// Headers a dead letter carries besides the original message's.
const (
	// HeaderDLQReason is why the message was dead-lettered.
	HeaderDLQReason = "Crawlhouse-Dlq-Reason"
	// HeaderDLQSubject is the subject the message was published to.
	HeaderDLQSubject = "Crawlhouse-Dlq-Subject"
	// HeaderDLQSequence is its sequence in the events stream.
	HeaderDLQSequence = "Crawlhouse-Dlq-Stream-Sequence"
	// HeaderDLQDeliveries is how many times it was delivered.
	HeaderDLQDeliveries = "Crawlhouse-Dlq-Deliveries"
	// HeaderDLQAt is when it was dead-lettered.
	HeaderDLQAt = "Crawlhouse-Dlq-At"
	// HeaderDLQMsgID keeps the original Nats-Msg-Id (the webhookId): the
	// dead letter's own Nats-Msg-Id is "<stream>.<sequence>", which makes a
	// dead-lettering repeated after a crash a duplicate.
	HeaderDLQMsgID = "Crawlhouse-Dlq-Msg-Id"
	// HeaderRedriveOf is set on a redriven message to its webhookId. A
	// redriven message needs a Nats-Msg-Id of its own, or the events
	// stream's duplicate window would drop it as the original's duplicate.
	HeaderRedriveOf = "Crawlhouse-Redrive-Of"
	// HeaderDLQBodyMissing is set on a dead letter whose body was stored
	// aside and was already gone when it was dead-lettered (the reason it
	// could not be read, usually): there is nothing to redrive.
	HeaderDLQBodyMissing = "Crawlhouse-Dlq-Body-Missing"
)

// WebhookID is the webhookId a message carries, read from its headers only
// (so that it works for a message that cannot be decoded): Nats-Msg-Id, or
// for a redriven message the id it was redriven for.
func WebhookID(h nats.Header) string {
	if id := h.Get(HeaderRedriveOf); id != "" {
		return id
	}
	return h.Get(HeaderMsgID)
}

// CrawlID is the crawl id a message's headers name ("" when none).
func CrawlID(h nats.Header) string { return h.Get(HeaderCrawlID) }

// Size is the size of the delivery a message carries as it was received:
// the Body-Size header, or the bytes carried when they are more (a hostile
// or missing header never makes a message count for less than it holds).
// The sink bounds the bytes it decodes at once with it.
func Size(h nats.Header, data []byte) int {
	n := len(data)
	if s, err := strconv.Atoi(h.Get(HeaderBodySize)); err == nil && s > n {
		n = s
	}
	return n
}

// original is the header of a delivery as the receiver published it: for a
// redriven message, Nats-Msg-Id is the webhookId again.
func original(h nats.Header) nats.Header {
	of := h.Get(HeaderRedriveOf)
	if of == "" {
		return h
	}
	c := make(nats.Header, len(h))
	for k, v := range h {
		c[k] = v
	}
	c[HeaderMsgID] = []string{of}
	return c
}
