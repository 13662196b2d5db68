// Package verify checks the signatures of webhook deliveries.
//
// The crawl API signs the raw request body with HMAC-SHA256 under a secret
// configured in the account, and sends "sha256=<hex>" in a header
// (X-Service-Signature in the interface document, X-Firecrawl-Signature from
// the real API). The signature is checked over the bytes exactly as
// received, before any JSON is parsed: re-serialising the JSON would change
// the bytes and the MAC.
package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
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

const prefix = "sha256="

// Verifier checks signatures against one or more secrets. Several secrets
// allow rotation: add the new secret, switch the sender, remove the old one.
// A Verifier is safe for concurrent use.
type Verifier struct {
	secrets [][]byte
}

// New returns a Verifier for the given secrets. Empty entries are ignored;
// at least one secret is required.
func New(secrets []string) (*Verifier, error) {
	v := &Verifier{}
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" {
			v.secrets = append(v.secrets, []byte(s))
		}
	}
	if len(v.secrets) == 0 {
		return nil, errors.New("verify: at least one secret is required")
	}
	return v, nil
}

// Parse decodes a header value "sha256=<hex>" into the MAC bytes. The
// algorithm prefix is matched case-insensitively; surrounding blanks are
// ignored.
func Parse(header string) ([]byte, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return nil, ErrMissing
	}
	if len(header) < len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return nil, fmt.Errorf("%w: want %s<hex>", ErrMalformed, prefix)
	}
	hexPart := header[len(prefix):]
	if len(hexPart) != hex.EncodedLen(sha256.Size) {
		return nil, fmt.Errorf("%w: want %d hex digits, got %d", ErrMalformed, hex.EncodedLen(sha256.Size), len(hexPart))
	}
	mac := make([]byte, sha256.Size)
	if _, err := hex.Decode(mac, []byte(hexPart)); err != nil {
		return nil, fmt.Errorf("%w: not hex", ErrMalformed)
	}
	return mac, nil
}

// Verify checks header against body. It returns nil when the MAC of body
// under any secret equals the header's; the comparison is constant-time, and
// every secret is tried so the time does not tell which one matched.
func (v *Verifier) Verify(header string, body []byte) error {
	want, err := Parse(header)
	if err != nil {
		return err
	}
	matched := false
	for _, s := range v.secrets {
		if hmac.Equal(Sign(s, body), want) {
			matched = true
		}
	}
	if !matched {
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
