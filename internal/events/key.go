package events

import (
	"bytes"
	"crypto/sha256"

	"github.com/google/uuid"
)

// keySpace is the namespace of derived delivery keys: a fixed, random UUID,
// so that no other name-based UUID can equal one.
var keySpace = uuid.MustParse("6d1c8f4e-0b7a-4c1e-9a57-3f2de8b4c901")

// DerivedKey is the idempotency key of a delivery that carries no
// webhookId: a UUID (version 8) made from the SHA-256 of the body, with
// JSON whitespace around the object trimmed (as Validate reads it). It
// stands wherever webhookId stands otherwise: the Nats-Msg-Id, the rows'
// webhook_id, the dead letters.
//
// Senders between 2025-09-02 and 2025-12-12 sign their deliveries but send
// no webhookId. A key derived from the delivery's meaning (job id, type,
// the page's scrape id or URL) was the other choice, and it is unsafe: the
// sender does not give each event a unique name, so two different
// deliveries can share one (a failed scrape of a URL and its later success
// carry the same job, type and URL, and the failed one carries no scrape
// id), and the second would be dropped as a duplicate: a page lost. The
// body is what the sender signed and what a replay sends again byte for
// byte, so the hash is the same every time the same delivery comes back,
// and two deliveries that differ in any byte are two deliveries. A sender
// that rebuilt a delivery with different bytes would get two keys; its
// pages still collapse under the pages table's key (crawl_id, url).
func DerivedKey(body []byte) string {
	return uuid.NewHash(sha256.New(), keySpace, bytes.Trim(body, jsonSpace), 8).String()
}
