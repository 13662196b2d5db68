package events

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Headers of a delivery's JetStream message. Nats-Msg-Id is JetStream's own
// deduplication header; the others tell the sink what it holds without
// decoding the body.
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
)

// EncodingZstd marks a zstd-compressed body.
const EncodingZstd = "zstd"

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
}

// Subject is the subject a delivery of type typ is published to:
// "<prefix>.<type>", e.g. "crawl.events.crawl.page".
func Subject(prefix, typ string) string { return prefix + "." + typ }

// NewEnvelope wraps a validated delivery body for publishing.
func NewEnvelope(prefix string, h Head, body []byte, receivedAt time.Time) *Envelope {
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

// Header returns the message headers of the envelope. The map is compatible
// with nats.Header.
func (e *Envelope) Header() map[string][]string {
	h := map[string][]string{
		HeaderMsgID:      {e.WebhookID},
		HeaderCrawlID:    {e.CrawlID},
		HeaderEventType:  {e.Type},
		HeaderReceivedAt: {e.ReceivedAt.Format(time.RFC3339Nano)},
		HeaderBodySize:   {fmt.Sprint(e.Size)},
	}
	if e.Encoding != "" {
		h[HeaderEncoding] = []string{e.Encoding}
	}
	if e.BodyRef != "" {
		h[HeaderBodyRef] = []string{e.BodyRef}
	}
	return h
}

// ParseEnvelope reads an envelope back from a message's subject, headers and
// data. The body is left as carried: see Open.
func ParseEnvelope(subject string, header map[string][]string, data []byte) (*Envelope, error) {
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
	}
	if e.Encoding != "" && e.Encoding != EncodingZstd {
		return nil, fmt.Errorf("header %s: unknown encoding %q", HeaderEncoding, e.Encoding)
	}
	return e, nil
}

// TypeFromSubject returns the event type of a subject under prefix.
func TypeFromSubject(prefix, subject string) string {
	return strings.TrimPrefix(subject, prefix+".")
}

var (
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
	zstdOnce sync.Once
)

func zstdInit() {
	// EncodeAll and DecodeAll are safe for concurrent use; one encoder
	// serves every delivery. Low concurrency keeps memory bounded.
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
}

// Compress returns body compressed with zstd.
func Compress(body []byte) []byte {
	zstdOnce.Do(zstdInit)
	return zenc.EncodeAll(body, make([]byte, 0, len(body)/4))
}

// Decompress reverses Compress. sizeHint, when known, sizes the output.
func Decompress(b []byte, sizeHint int) ([]byte, error) {
	zstdOnce.Do(zstdInit)
	out, err := zdec.DecodeAll(b, make([]byte, 0, max(sizeHint, 0)))
	if err != nil {
		return nil, fmt.Errorf("decompress body: %w", err)
	}
	return out, nil
}

// Decode returns the delivery bytes of an envelope whose body is carried in
// the message (compressed or not). Bodies stored aside (BodyRef set) are
// fetched by the caller first and passed as body.
func (e *Envelope) Decode(body []byte) ([]byte, error) {
	if e.Encoding == EncodingZstd {
		return Decompress(body, e.Size)
	}
	return body, nil
}
