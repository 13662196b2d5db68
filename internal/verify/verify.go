// Package verify checks the signatures of webhook deliveries.
//
// The crawl API signs the raw request body with HMAC-SHA256 under a secret
// configured in the account, and sends "sha256=<hex>" in a header
// (X-Service-Signature in the interface document, X-Firecrawl-Signature from
// the real API). The signature is checked over the bytes exactly as
// received, before any JSON is parsed: re-serialising the JSON would change
// the bytes and the MAC.
//
// Tokens (token.go) checks a shared token in constant time, for what
// cannot be signed: deliveries from senders that cannot sign (the receiver's
// WEBHOOK_TOKENS) and the read API's bearer tokens.
package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// Outcomes callers branch on. Every error Verify returns wraps one of them.
var (
	// ErrMissing: the signature header is absent or empty.
	ErrMissing = errors.New("signature missing")
	// ErrMalformed: the header is not "sha256=" followed by 64 hex digits.
	ErrMalformed = errors.New("signature malformed")
	// ErrMismatch: the signature matches none of the secrets.
	ErrMismatch = errors.New("signature mismatch")
)

// DefaultHeader is the header the interface document names.
const DefaultHeader = "X-Service-Signature"

// FirecrawlHeader is the header the real crawl API signs in.
const FirecrawlHeader = "X-Firecrawl-Signature"

const prefix = "sha256="

// Verifier checks signatures against one or more secrets. Several secrets
// allow rotation: add the new secret, switch the sender, remove the old one.
// A Verifier is safe for concurrent use.
type Verifier struct {
	secrets []*secretMAC
}

// secretMAC keeps HMAC states keyed with one secret for reuse: hmac.New
// hashes the key into its inner and outer pads, and Reset goes back to
// that state without allocating.
type secretMAC struct {
	pool sync.Pool // of hash.Hash
}

func newSecretMAC(secret []byte) *secretMAC {
	return &secretMAC{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}}
}

// sum writes the HMAC of body into out.
func (m *secretMAC) sum(body []byte, out *[sha256.Size]byte) {
	h := m.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(body)
	h.Sum(out[:0])
	m.pool.Put(h)
}

// New returns a Verifier for the given secrets. Empty entries are ignored;
// at least one secret is required.
func New(secrets []string) (*Verifier, error) {
	v := &Verifier{}
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" {
			v.secrets = append(v.secrets, newSecretMAC([]byte(s)))
		}
	}
	if len(v.secrets) == 0 {
		return nil, errors.New("verify: at least one secret is required")
	}
	return v, nil
}

// parse decodes a header value "sha256=<hex>" into mac, the caller's array
// (no allocation on the hot path). The algorithm prefix is matched
// case-insensitively; surrounding blanks are ignored.
func parse(header string, mac *[sha256.Size]byte) error {
	header = strings.TrimSpace(header)
	if header == "" {
		return ErrMissing
	}
	if len(header) < len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return fmt.Errorf("%w: want %s<hex>", ErrMalformed, prefix)
	}
	hexPart := header[len(prefix):]
	if len(hexPart) != hex.EncodedLen(sha256.Size) {
		return fmt.Errorf("%w: want %d hex digits, got %d", ErrMalformed, hex.EncodedLen(sha256.Size), len(hexPart))
	}
	for i := range mac {
		hi, ok1 := fromHex(hexPart[2*i])
		lo, ok2 := fromHex(hexPart[2*i+1])
		if !ok1 || !ok2 {
			return fmt.Errorf("%w: not hex", ErrMalformed)
		}
		mac[i] = hi<<4 | lo
	}
	return nil
}

func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Verify checks header against body. It returns nil when the MAC of body
// under any secret equals the header's; the comparison is constant-time, and
// every secret is tried so the time does not tell which one matched.
func (v *Verifier) Verify(header string, body []byte) error {
	var want, got [sha256.Size]byte
	if err := parse(header, &want); err != nil {
		return err
	}
	matched := false
	for _, s := range v.secrets {
		s.sum(body, &got)
		if hmac.Equal(got[:], want[:]) {
			matched = true
		}
	}
	if !matched {
		return ErrMismatch
	}
	return nil
}

// maxHeaders is the most header values VerifyAny weighs.
const maxHeaders = 4

// VerifyAny checks body against several header values, each "sha256=<hex>"
// or empty (absent): it returns nil when any present value is the MAC of
// body under any secret. A value that is present but wrong never makes a
// request pass and never stops another, valid, value from doing so. Every
// secret is tried against every value, constant-time, whatever matched.
// With no value present it returns ErrMissing; with none well-formed, the
// first value's parse error; otherwise ErrMismatch.
func (v *Verifier) VerifyAny(body []byte, headers ...string) error {
	var wants [maxHeaders][sha256.Size]byte
	n := 0
	var firstErr error
	for _, h := range headers {
		if n == maxHeaders {
			break
		}
		err := parse(h, &wants[n])
		if err == nil {
			n++
			continue
		}
		if firstErr == nil || errors.Is(firstErr, ErrMissing) {
			firstErr = err
		}
	}
	if n == 0 {
		if firstErr == nil {
			firstErr = ErrMissing
		}
		return firstErr
	}
	var got [sha256.Size]byte
	matched := 0
	for _, s := range v.secrets {
		s.sum(body, &got)
		for i := 0; i < n; i++ {
			if hmac.Equal(got[:], wants[i][:]) {
				matched++
			}
		}
	}
	if matched == 0 {
		return ErrMismatch
	}
	return nil
}

// Sign returns the HMAC-SHA256 of body under secret.
func Sign(secret, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return m.Sum(nil)
}

// Header returns the header value a sender puts on body: "sha256=<hex>".
func Header(secret string, body []byte) string {
	return prefix + hex.EncodeToString(Sign([]byte(secret), body))
}
