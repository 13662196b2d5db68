package verify

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strings"
)

// ErrToken: the shared token is absent or matches none of the configured
// ones. Its text never repeats what was presented.
var ErrToken = errors.New("token missing or wrong")

// MinTokenLength is the shortest token Tokens takes: a shared token is all
// that stands between the internet and the stream for the senders that
// use it, so it must not be guessable.
const MinTokenLength = 16

// Tokens checks a shared token, the authentication of senders that cannot
// sign (crawl API builds before 2025-09-02), which send it in a header a
// user put into the job's webhook.headers. Unlike a signature it does not
// bind the body: whoever sees one delivery can send any body with it, so it
// is only as safe as the TLS it travels in. Several tokens allow rotation,
// as the secrets do. Tokens is safe for concurrent use.
type Tokens struct {
	// digests are SHA-256 of the tokens: comparing digests of fixed length
	// keeps the comparison's time independent of the lengths of both the
	// token presented and the ones configured.
	digests [][sha256.Size]byte
}

// NewTokens returns the checker of tokens. Blank entries are ignored; at
// least one token is required, each of at least MinTokenLength bytes. The
// error never quotes a token.
func NewTokens(tokens []string) (*Tokens, error) {
	t := &Tokens{}
	for _, s := range tokens {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if len(s) < MinTokenLength {
			return nil, errors.New("verify: every token must have at least 16 characters")
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(s)))
	}
	if len(t.digests) == 0 {
		return nil, errors.New("verify: at least one token is required")
	}
	return t, nil
}

// Check reports whether the header value carries one of the tokens: the
// token itself or "Bearer <token>" (the scheme case-insensitive, blanks
// around ignored). Every configured token is compared, in constant time,
// whichever matched. It returns nil or ErrToken.
func (t *Tokens) Check(header string) error {
	v := strings.TrimSpace(header)
	if len(v) > len("bearer ") && strings.EqualFold(v[:len("bearer ")], "bearer ") {
		v = strings.TrimSpace(v[len("bearer "):])
	}
	if v == "" {
		return ErrToken
	}
	got := sha256.Sum256([]byte(v))
	matched := 0
	for i := range t.digests {
		matched |= subtle.ConstantTimeCompare(got[:], t.digests[i][:])
	}
	if matched == 0 {
		return ErrToken
	}
	return nil
}
