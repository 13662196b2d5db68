package receiver

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// Config is the configuration of the receiver's HTTP side, read from the
// environment (config/environment.md) as part of the binary's
// (receivercmd.Config). The tags are kelseyhightower/envconfig's; Load
// reads them through an injectable getenv.
type Config struct {
	StreamConfig
	QuarantineConfig

	// Path takes the deliveries (POST).
	Path string `envconfig:"WEBHOOK_PATH" default:"/webhooks/crawl" desc:"path that takes deliveries (POST)"`
	// Secrets are the HMAC secrets; any one may match (rotation).
	Secrets []string `envconfig:"WEBHOOK_SECRETS" desc:"comma-separated HMAC secrets, any one may match; required unless WEBHOOK_ALLOW_UNSIGNED=true"`
	// AllowUnsigned accepts deliveries without a signature header
	// (development only). A signature that is present is still checked
	// when secrets are set.
	AllowUnsigned bool `envconfig:"WEBHOOK_ALLOW_UNSIGNED" default:"false" desc:"accept deliveries without signature (development only)"`
	// SignatureHeader holds "sha256=<hex>". Left unset, a valid signature
	// in X-Service-Signature (the interface document's) or in
	// X-Firecrawl-Signature (the real API's) is accepted; set, only that
	// header counts (see SignatureHeaders).
	SignatureHeader string `envconfig:"WEBHOOK_SIGNATURE_HEADER" default:"X-Service-Signature" desc:"header holding sha256=<hex>; unset, X-Service-Signature or X-Firecrawl-Signature is accepted, set, only this header"`
	// Tokens, TokenHeader and TokenSources let senders that cannot sign
	// (crawl API builds before 2025-09-02) authenticate with a shared token
	// that users put into the job's webhook.headers (token.go). Off while
	// Tokens is empty; a delivery that carries a signature is always judged
	// by its signature.
	Tokens       []string `envconfig:"WEBHOOK_TOKENS" desc:"comma-separated shared tokens (at least 16 characters each) accepted from senders that cannot sign; any one may match (rotation); empty: off"`
	TokenHeader  string   `envconfig:"WEBHOOK_TOKEN_HEADER" default:"Authorization" desc:"header holding the shared token, as Bearer <token> or the token alone"`
	TokenSources []string `envconfig:"WEBHOOK_TOKEN_SOURCES" desc:"comma-separated CIDRs from which a shared token is accepted; empty: from anywhere"`
	// signatureHeaderSet is whether WEBHOOK_SIGNATURE_HEADER was given:
	// envconfig fills the default either way, so Load reads the raw value.
	signatureHeaderSet bool
	// MaxBodyBytes: larger bodies get 413.
	MaxBodyBytes int64 `envconfig:"WEBHOOK_MAX_BODY_BYTES" default:"33554432" desc:"larger bodies get 413"`
	// PublishTimeout is the longest wait for a PubAck before answering 503.
	// The sender gives up after 10 s, so it stays well below that.
	PublishTimeout time.Duration `envconfig:"RECEIVER_PUBLISH_TIMEOUT" default:"5s" desc:"longest wait for a PubAck before answering 503"`
	// ReadTimeout bounds reading one request, headers and body: a sender
	// that has not delivered its whole body by then is answered 408 and its
	// in-flight slot freed, so slow clients cannot hold RECEIVER_MAX_INFLIGHT
	// slots longer than this.
	ReadTimeout time.Duration `envconfig:"RECEIVER_READ_TIMEOUT" default:"30s" desc:"longest time to read one request (headers and body); a slower body gets 408"`
	// MaxInflight bounds concurrent deliveries; beyond it 429.
	MaxInflight int `envconfig:"RECEIVER_MAX_INFLIGHT" default:"1024" desc:"concurrent deliveries in progress; beyond it 429 with Retry-After"`
	// MaxInflightBytes bounds the request-body bytes held by all
	// deliveries in progress together (buffers grow as bytes arrive, never
	// on the word of Content-Length); a delivery that cannot get its bytes
	// is answered 429. It must hold two bodies of the largest size: a
	// growing buffer briefly holds its old and its new copy.
	MaxInflightBytes int64 `envconfig:"RECEIVER_MAX_INFLIGHT_BYTES" default:"268435456" desc:"request-body bytes held by all deliveries in progress together; beyond it 429 with Retry-After"`
	// BodyTimeout and BodyMinRate are the minimum transfer rate of a body
	// (pace.go): it may take BodyTimeout plus one second for every
	// BodyMinRate bytes that arrived, never more than ReadTimeout; a slower
	// one is answered 408.
	BodyTimeout time.Duration `envconfig:"RECEIVER_BODY_TIMEOUT" default:"5s" desc:"time a body may take before it must keep RECEIVER_BODY_MIN_RATE; a slower body gets 408"`
	BodyMinRate int64         `envconfig:"RECEIVER_BODY_MIN_RATE" default:"65536" desc:"minimum transfer rate of a body in bytes per second, after RECEIVER_BODY_TIMEOUT"`
	// The bodies read before their signature is checked, from senders
	// not trusted yet (admission.go): all of them together, and each
	// address's share (enforced once the pool is half taken). A full pool
	// evicts its slowest body to make room for a new one. An address is
	// trusted once it sent a delivery whose signature verified.
	MaxUnverified             int   `envconfig:"RECEIVER_MAX_UNVERIFIED" default:"1024" desc:"bodies read at once from senders not trusted yet, before their signature is checked; beyond it the slowest is evicted (429, outcome evicted) to make room"`
	MaxUnverifiedPerAddr      int   `envconfig:"RECEIVER_MAX_UNVERIFIED_PER_ADDR" default:"256" desc:"share of one client address in RECEIVER_MAX_UNVERIFIED once it is half taken; beyond it 429 (outcome address_limit)"`
	MaxUnverifiedBytes        int64 `envconfig:"RECEIVER_MAX_UNVERIFIED_BYTES" default:"134217728" desc:"body bytes held by those bodies together, within RECEIVER_MAX_INFLIGHT_BYTES; beyond it the slowest are evicted (429, outcome evicted) to make room"`
	MaxUnverifiedBytesPerAddr int64 `envconfig:"RECEIVER_MAX_UNVERIFIED_BYTES_PER_ADDR" default:"67108866" desc:"share of one client address in RECEIVER_MAX_UNVERIFIED_BYTES once it is half taken; beyond it 429 (outcome address_limit)"`

	// TrustedProxies are the peers whose X-Forwarded-For is believed for
	// the client address that is logged. None by default: the address
	// logged is the connection's, whatever headers a sender adds.
	TrustedProxies []string `envconfig:"RECEIVER_TRUSTED_PROXIES" desc:"comma-separated CIDRs of proxies whose X-Forwarded-For gives the client address logged; none by default"`
	// TraceTrustedSenders are the client networks whose signed deliveries
	// continue the trace of their traceparent (tracing.Deliveries). None by
	// default: every delivery's span starts a new trace, sampled here, and
	// no sender's trace context reaches the stream. The client address is
	// the one logged (see TrustedProxies).
	TraceTrustedSenders []string `envconfig:"RECEIVER_TRACE_TRUSTED_SENDERS" desc:"comma-separated CIDRs of senders whose signed deliveries continue their traceparent's trace; none by default"`
}

// Validate reports every invalid setting at once, joined.
func (c Config) Validate() error {
	errs := []error{c.StreamConfig.Validate(), c.QuarantineConfig.Validate()}
	if !strings.HasPrefix(c.Path, "/") {
		errs = append(errs, errors.New("WEBHOOK_PATH: must start with /"))
	}
	if len(c.secrets()) == 0 && len(c.tokens()) == 0 && !c.AllowUnsigned {
		errs = append(errs, errors.New("WEBHOOK_SECRETS: required unless WEBHOOK_ALLOW_UNSIGNED=true or WEBHOOK_TOKENS is set (refusing to accept unsigned deliveries)"))
	}
	errs = append(errs, c.validateTokens()...)
	if strings.TrimSpace(c.SignatureHeader) == "" {
		errs = append(errs, errors.New("WEBHOOK_SIGNATURE_HEADER: must not be empty"))
	}
	if _, err := c.trustedProxies(); err != nil {
		errs = append(errs, err)
	}
	if senders, err := c.traceTrustedSenders(); err != nil {
		errs = append(errs, err)
	} else if len(senders) > 0 && c.AllowUnsigned {
		errs = append(errs, errors.New("RECEIVER_TRACE_TRUSTED_SENDERS: a trace context is trusted only from a signed delivery; unset it or WEBHOOK_ALLOW_UNSIGNED"))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, errors.New("WEBHOOK_MAX_BODY_BYTES: must be positive"))
	}
	if c.PublishTimeout <= 0 || c.PublishTimeout >= 10*time.Second {
		errs = append(errs, fmt.Errorf("RECEIVER_PUBLISH_TIMEOUT: %s must be above 0 and below the sender's 10s", c.PublishTimeout))
	}
	if c.ReadTimeout <= 0 {
		errs = append(errs, errors.New("RECEIVER_READ_TIMEOUT: must be positive"))
	}
	if c.MaxInflight <= 0 {
		errs = append(errs, errors.New("RECEIVER_MAX_INFLIGHT: must be positive"))
	}
	if c.MaxBodyBytes > 0 && (c.MaxInflightBytes <= 0 || c.MaxInflightBytes/2 < c.MaxBodyBytes+1) {
		errs = append(errs, fmt.Errorf("RECEIVER_MAX_INFLIGHT_BYTES: %d must be at least twice WEBHOOK_MAX_BODY_BYTES (%d), or no body of the largest size could be read", c.MaxInflightBytes, c.MaxBodyBytes))
	}
	errs = append(errs, c.validateAdmission()...)
	return errors.Join(errs...)
}

// validateAdmission checks the limits of what is read before
// authentication (admission.go, pace.go).
func (c Config) validateAdmission() []error {
	var errs []error
	if c.BodyTimeout <= 0 || c.BodyTimeout > time.Hour {
		errs = append(errs, fmt.Errorf("RECEIVER_BODY_TIMEOUT: %s must be above 0 and at most 1h", c.BodyTimeout))
	}
	if c.BodyMinRate < 1 || c.BodyMinRate > 1<<30 {
		errs = append(errs, fmt.Errorf("RECEIVER_BODY_MIN_RATE: %d must be between 1 and %d bytes a second", c.BodyMinRate, 1<<30))
	}
	if c.MaxUnverified < 1 || c.MaxUnverified > 1<<20 {
		errs = append(errs, fmt.Errorf("RECEIVER_MAX_UNVERIFIED: %d must be between 1 and %d", c.MaxUnverified, 1<<20))
	}
	if c.MaxUnverifiedPerAddr < 1 || c.MaxUnverifiedPerAddr > 1<<20 {
		errs = append(errs, fmt.Errorf("RECEIVER_MAX_UNVERIFIED_PER_ADDR: %d must be between 1 and %d", c.MaxUnverifiedPerAddr, 1<<20))
	}
	if c.MaxUnverifiedBytes <= 0 {
		errs = append(errs, errors.New("RECEIVER_MAX_UNVERIFIED_BYTES: must be positive"))
	}
	if c.MaxUnverifiedBytesPerAddr <= 0 {
		errs = append(errs, errors.New("RECEIVER_MAX_UNVERIFIED_BYTES_PER_ADDR: must be positive"))
	} else if l := c.unverifiedLimits(); c.MaxBodyBytes > 0 && c.MaxUnverifiedBytes > 0 && l.bytesPerAddr/2 < c.MaxBodyBytes+1 {
		errs = append(errs, fmt.Errorf("RECEIVER_MAX_UNVERIFIED_BYTES_PER_ADDR: %d (capped by RECEIVER_MAX_UNVERIFIED_BYTES and RECEIVER_MAX_INFLIGHT_BYTES) must be at least twice WEBHOOK_MAX_BODY_BYTES (%d), or a sender not trusted yet could not send a body of the largest size", l.bytesPerAddr, c.MaxBodyBytes))
	}
	return errs
}

// unverifiedLimits are the admission's limits, each capped by the one it
// is a part of: an address's share by the pool, the pool's bytes by
// RECEIVER_MAX_INFLIGHT_BYTES.
type unverifiedLimits struct {
	max, perAddr        int
	bytes, bytesPerAddr int64
}

func (c Config) unverifiedLimits() unverifiedLimits {
	l := unverifiedLimits{max: c.MaxUnverified, bytes: min(c.MaxUnverifiedBytes, c.MaxInflightBytes)}
	l.perAddr = min(c.MaxUnverifiedPerAddr, l.max)
	l.bytesPerAddr = min(c.MaxUnverifiedBytesPerAddr, l.bytes)
	return l
}

// StreamConfig names the embedded part of Config: the package calls its
// type Config, and Go names an embedded field after its type.
type StreamConfig = stream.Config

// secrets are the non-empty configured secrets.
func (c Config) secrets() []string { return nonBlank(c.Secrets) }

// nonBlank is entries trimmed, without the empty ones.
func nonBlank(entries []string) []string {
	var out []string
	for _, s := range entries {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// verifier is nil when no secret is configured (WEBHOOK_ALLOW_UNSIGNED).
func (c Config) verifier() (*verify.Verifier, error) {
	if len(c.secrets()) == 0 {
		return nil, nil
	}
	return verify.New(c.secrets())
}

// SignatureHeaders are the headers a signature is taken from: the one
// WEBHOOK_SIGNATURE_HEADER names when it is set, else both the interface
// document's and the real API's.
func (c Config) SignatureHeaders() []string {
	if c.signatureHeaderSet {
		return []string{strings.TrimSpace(c.SignatureHeader)}
	}
	return []string{verify.DefaultHeader, verify.FirecrawlHeader}
}

// trustedProxies parses RECEIVER_TRUSTED_PROXIES (see networks).
func (c Config) trustedProxies() ([]*net.IPNet, error) {
	return networks("RECEIVER_TRUSTED_PROXIES", c.TrustedProxies)
}

// traceTrustedSenders parses RECEIVER_TRACE_TRUSTED_SENDERS (see networks).
func (c Config) traceTrustedSenders() ([]*net.IPNet, error) {
	return networks("RECEIVER_TRACE_TRUSTED_SENDERS", c.TraceTrustedSenders)
}

// networks parses the list of variable name: CIDRs, or single addresses
// taken as one-address ranges. The error names the entry by its position,
// not its value.
func networks(name string, entries []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for i, p := range entries {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			ip := net.ParseIP(p)
			if ip == nil {
				return nil, fmt.Errorf("%s: entry %d is neither a CIDR (e.g. 10.0.0.0/8) nor an IP address", name, i+1)
			}
			bits := 128
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d is not a CIDR (e.g. 10.0.0.0/8)", name, i+1)
		}
		out = append(out, n)
	}
	return out, nil
}
