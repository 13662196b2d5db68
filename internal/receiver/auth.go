package receiver

import (
	"fmt"

	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/rs/zerolog"
)

// Auth is how deliveries are authenticated: the verifier of the
// WEBHOOK_SECRETS signatures (nil: no secret set) and the shared tokens of
// WEBHOOK_TOKENS (nil: off; token.go).
type Auth struct {
	verifier *verify.Verifier
	tokens   *tokenAuth
}

// NewAuth builds the authentication of a validated configuration; the
// error names the variable. What weakens it (unsigned deliveries, shared
// tokens) is logged as a warning at every start while it is on.
func NewAuth(cfg Config, log zerolog.Logger) (Auth, error) {
	verifier, err := cfg.verifier()
	if err != nil {
		return Auth{}, fmt.Errorf("config: WEBHOOK_SECRETS: %w", err)
	}
	tokens, err := newTokenAuth(cfg)
	if err != nil {
		return Auth{}, fmt.Errorf("config: WEBHOOK_TOKENS: %w", err)
	}
	if cfg.AllowUnsigned {
		log.Warn().Msg("WEBHOOK_ALLOW_UNSIGNED=true: deliveries without a signature are accepted (development only)")
	}
	if tokens != nil {
		// The token does not bind the body, so anyone who sees one
		// delivery can forge others.
		log.Warn().Str("header", tokens.header).Int("tokens", len(cfg.tokens())).Strs("sources", cfg.TokenSources).
			Msg("WEBHOOK_TOKENS set: deliveries without a signature are accepted with a shared token; it does not bind the body, so serve the receiver over TLS only and prefer signed senders (docs/reliability.md)")
	}
	return Auth{verifier: verifier, tokens: tokens}, nil
}
