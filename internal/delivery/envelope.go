package delivery

import (
	"fmt"
	"strconv"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/nats-io/nats.go"
)

// Envelope is a delivery as it travels through JetStream: where it goes, the
// facts the sink needs, and the body (as received, compressed, or stored
// aside under BodyRef).
type Envelope struct {
	Subject    string
	WebhookID  string
	CrawlID    string
	Type       string
	ReceivedAt time.Time
	// Size is the length of the delivery as received.
	Size     int
	Encoding string
	BodyRef  string
	Body     []byte
	// TraceParent and TraceState are the W3C trace context of the
	// delivery's span, "" when tracing is off.
	TraceParent string
	TraceState  string
}

// Subject is the subject a delivery of type typ is published to:
// "<prefix>.<type>", e.g. "crawl.events.crawl.page".
func Subject(prefix, typ string) string { return prefix + "." + typ }

// NewEnvelope wraps a validated delivery body for publishing.
func NewEnvelope(prefix string, h events.Head, body []byte, receivedAt time.Time) *Envelope {
	return &Envelope{
		Subject:    Subject(prefix, h.Type),
		WebhookID:  h.WebhookID,
		CrawlID:    h.CrawlID,
		Type:       h.Type,
		ReceivedAt: receivedAt.UTC(),
		Size:       len(body),
		Body:       body,
	}
}

// Header returns the message headers of the envelope. A body carried as
// received gets its id and time alone: the crawl id, the type and the size
// are in the body, where the sink reads them (it always could), and every
// header is bytes the server scans for its own keys and stores with the
// message, and the sink parses again. A body compressed or stored aside
// keeps them as headers too: its size is not its length, and a dead letter
// whose stored body is gone is still told apart by its crawl id (a
// takedown of the job matches it). It is built for every delivery the
// receiver publishes, so its values share one backing array, and the map
// is sized to stay a single group (at most 8 entries).
func (e *Envelope) Header() nats.Header {
	var buf [64]byte
	vals := make([]string, 0, 7)
	h := make(nats.Header, 7)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set(HeaderMsgID, e.WebhookID)
	set(HeaderReceivedAt, string(e.ReceivedAt.AppendFormat(buf[:0], time.RFC3339Nano)))
	if e.Encoding != "" || e.BodyRef != "" {
		set(HeaderCrawlID, e.CrawlID)
		set(HeaderEventType, e.Type)
		set(HeaderBodySize, strconv.Itoa(e.Size))
		if e.Encoding != "" {
			set(HeaderEncoding, e.Encoding)
		}
		if e.BodyRef != "" {
			set(HeaderBodyRef, e.BodyRef)
		}
	}
	if e.TraceParent != "" {
		set(HeaderTraceParent, e.TraceParent)
		if e.TraceState != "" {
			set(HeaderTraceState, e.TraceState)
		}
	}
	return h
}

// Decode reads an envelope back from a message's subject, headers and data.
// A redriven message is read as the delivery it was redriven for (its
// webhookId, not the redrive's own Nats-Msg-Id). The body is left as
// carried: Bodies.Open returns the delivery's bytes.
func Decode(subject string, header nats.Header, data []byte) (*Envelope, error) {
	header = original(header)
	get := func(k string) string {
		if v := header[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	e := &Envelope{
		Subject:   subject,
		WebhookID: get(HeaderMsgID),
		CrawlID:   get(HeaderCrawlID),
		Type:      get(HeaderEventType),
		Encoding:  get(HeaderEncoding),
		BodyRef:   get(HeaderBodyRef),
		Body:      data,
		// Read as carried: the sink parses them by the W3C rules, which
		// drop a malformed value (internal/tracing.FromParent).
		TraceParent: get(HeaderTraceParent),
		TraceState:  get(HeaderTraceState),
	}
	if e.WebhookID == "" {
		return nil, fmt.Errorf("message has no %s header", HeaderMsgID)
	}
	if t := get(HeaderReceivedAt); t != "" {
		at, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", HeaderReceivedAt, err)
		}
		e.ReceivedAt = at
	}
	if s := get(HeaderBodySize); s != "" {
		fmt.Sscan(s, &e.Size)
	} else if e.Encoding == "" && e.BodyRef == "" {
		// Carried as received: the size is the body's.
		e.Size = len(data)
	}
	if e.Encoding != "" && e.Encoding != EncodingZstd {
		return nil, fmt.Errorf("header %s: unknown encoding %q", HeaderEncoding, e.Encoding)
	}
	return e, nil
}
