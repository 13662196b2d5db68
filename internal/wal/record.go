package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
)

// An entry's value is a delivery as received: a version byte, then the
// subject, webhookId, crawl id and type as length-prefixed strings, the
// receive time (unix nanoseconds) and the body, length-prefixed. The
// body's encoding and reference are not kept: the publisher derives them
// again from the body when the entry is replayed.
const recordVersion = 1

// maxField bounds a string field on decoding; maxBody the body (the
// receiver's own WEBHOOK_MAX_BODY_BYTES is far below it).
const (
	maxField = 4 << 10
	maxBody  = 1 << 30
)

func recordLen(env *delivery.Envelope) int {
	n := 1
	for _, s := range []string{env.Subject, env.WebhookID, env.CrawlID, env.Type} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	n += 8
	return n + uvarintLen(uint64(len(env.Body))) + len(env.Body)
}

func uvarintLen(x uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], x)
}

// putRecord writes env into b, which is recordLen(env) long; the receive
// time takes a fixed 8 bytes, big-endian.
func putRecord(b []byte, env *delivery.Envelope) {
	b[0] = recordVersion
	i := 1
	for _, s := range []string{env.Subject, env.WebhookID, env.CrawlID, env.Type} {
		i += binary.PutUvarint(b[i:], uint64(len(s)))
		i += copy(b[i:], s)
	}
	binary.BigEndian.PutUint64(b[i:], uint64(env.ReceivedAt.UnixNano()))
	i += 8
	i += binary.PutUvarint(b[i:], uint64(len(env.Body)))
	copy(b[i:], env.Body)
}

var errCorrupt = errors.New("corrupt entry")

// decodeRecord reads an entry back; the body is copied out of pebble's
// buffer.
func decodeRecord(b []byte) (*delivery.Envelope, error) {
	if len(b) < 1 || b[0] != recordVersion {
		return nil, fmt.Errorf("%w: unknown version", errCorrupt)
	}
	i := 1
	var fields [4]string
	for f := range fields {
		n, w := binary.Uvarint(b[i:])
		if w <= 0 || n > maxField || uint64(len(b)-i-w) < n {
			return nil, fmt.Errorf("%w: field %d", errCorrupt, f)
		}
		i += w
		fields[f] = string(b[i : i+int(n)])
		i += int(n)
	}
	if len(b)-i < 8 {
		return nil, fmt.Errorf("%w: receive time", errCorrupt)
	}
	at := int64(binary.BigEndian.Uint64(b[i:]))
	i += 8
	n, w := binary.Uvarint(b[i:])
	if w <= 0 || n > maxBody || uint64(len(b)-i-w) != n {
		return nil, fmt.Errorf("%w: body", errCorrupt)
	}
	i += w
	body := append([]byte(nil), b[i:]...)
	if fields[0] == "" || fields[1] == "" || fields[3] == "" {
		return nil, fmt.Errorf("%w: no subject, webhookId or type", errCorrupt)
	}
	return &delivery.Envelope{
		Subject:    fields[0],
		WebhookID:  fields[1],
		CrawlID:    fields[2],
		Type:       fields[3],
		ReceivedAt: time.Unix(0, at).UTC(),
		Size:       len(body),
		Body:       body,
	}, nil
}
