package receiver

import (
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// errTokenSource: a shared token came from an address outside
// WEBHOOK_TOKEN_SOURCES. Answered like a wrong token.
var errTokenSource = errors.New("token not accepted from this address")

// tokenAuth authenticates deliveries that carry no signature by a shared
// token (WEBHOOK_TOKENS), for senders that cannot sign. The token does not
// bind the body and travels with every delivery: it is accepted only in
// the configured header, only from WEBHOOK_TOKEN_SOURCES when that is set,
// and never logged (the values are scrubbed from every log line as well).
type tokenAuth struct {
	tokens  *verify.Tokens
	header  string
	sources []*net.IPNet // empty: any address
}

// newTokenAuth is nil when WEBHOOK_TOKENS is empty (the option is off).
func newTokenAuth(c Config) (*tokenAuth, error) {
	if len(c.tokens()) == 0 {
		return nil, nil
	}
	t, err := verify.NewTokens(c.tokens())
	if err != nil {
		return nil, err
	}
	sources, err := c.tokenSources()
	if err != nil {
		return nil, err
	}
	return &tokenAuth{tokens: t, header: strings.TrimSpace(c.TokenHeader), sources: sources}, nil
}

// check authenticates a delivery from remote (the client address as
// logged, see RECEIVER_TRUSTED_PROXIES) by the token in h.
func (a *tokenAuth) check(h http.Header, remote string) error {
	if len(a.sources) > 0 && !contains(a.sources, remote) {
		return errTokenSource
	}
	return a.tokens.Check(h.Get(a.header))
}

// contains reports whether the address addr is in one of nets.
func contains(nets []*net.IPNet, addr string) bool {
	ip := net.ParseIP(addr)
	if ip == nil {
		return false
	}
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// tokens are the non-empty configured tokens.
func (c Config) tokens() []string { return nonBlank(c.Tokens) }

// tokenSources parses WEBHOOK_TOKEN_SOURCES (see networks).
func (c Config) tokenSources() ([]*net.IPNet, error) {
	return networks("WEBHOOK_TOKEN_SOURCES", c.TokenSources)
}

// validateTokens checks the shared-token settings. No message repeats a
// token.
func (c Config) validateTokens() []error {
	var errs []error
	sources, err := c.tokenSources()
	if err != nil {
		errs = append(errs, err)
	}
	if len(c.tokens()) == 0 {
		if len(sources) > 0 {
			errs = append(errs, errors.New("WEBHOOK_TOKEN_SOURCES: set without WEBHOOK_TOKENS"))
		}
		return errs
	}
	for _, t := range c.tokens() {
		if len(t) < verify.MinTokenLength {
			errs = append(errs, errors.New("WEBHOOK_TOKENS: every token must have at least 16 characters"))
			break
		}
	}
	if c.AllowUnsigned {
		errs = append(errs, errors.New("WEBHOOK_TOKENS: pointless with WEBHOOK_ALLOW_UNSIGNED=true, which accepts deliveries without any; unset one"))
	}
	if h := strings.TrimSpace(c.TokenHeader); h == "" || strings.ContainsAny(h, " :\t") {
		errs = append(errs, errors.New("WEBHOOK_TOKEN_HEADER: must be a header name"))
	}
	for _, sig := range c.SignatureHeaders() {
		if strings.EqualFold(sig, strings.TrimSpace(c.TokenHeader)) {
			errs = append(errs, errors.New("WEBHOOK_TOKEN_HEADER: must differ from the signature header"))
		}
	}
	return errs
}
