package receiver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/crawlhouse/crawlhouse/internal/wal"
)

// Config is the receiver's configuration, read from the environment
// (config/environment.md). The tags are kelseyhightower/envconfig's; Load reads them through an
// injectable getenv so that tests run the binary as users start it.
type Config struct {
	LogConfig
	StreamConfig
	TracingConfig
	QuarantineConfig

	// Listen is the HTTP listen address. Port 0 picks a free port; Run
	// reports the bound address (see Options.Ready).
	Listen string `envconfig:"RECEIVER_LISTEN" default:":8080" desc:"HTTP listen address"`
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
	// address's share (enforced once the pool is half taken). An address
	// is trusted once it sent a delivery whose signature verified.
	MaxUnverified             int   `envconfig:"RECEIVER_MAX_UNVERIFIED" default:"1024" desc:"bodies read at once from senders not trusted yet, before their signature is checked; beyond it 429"`
	MaxUnverifiedPerAddr      int   `envconfig:"RECEIVER_MAX_UNVERIFIED_PER_ADDR" default:"256" desc:"share of one client address in RECEIVER_MAX_UNVERIFIED once it is half taken; beyond it 429 (outcome address_limit)"`
	MaxUnverifiedBytes        int64 `envconfig:"RECEIVER_MAX_UNVERIFIED_BYTES" default:"134217728" desc:"body bytes held by those bodies together, within RECEIVER_MAX_INFLIGHT_BYTES; beyond it 429"`
	MaxUnverifiedBytesPerAddr int64 `envconfig:"RECEIVER_MAX_UNVERIFIED_BYTES_PER_ADDR" default:"67108866" desc:"share of one client address in RECEIVER_MAX_UNVERIFIED_BYTES once it is half taken; beyond it 429 (outcome address_limit)"`
	// GroupCommit lets concurrent deliveries share one JetStream atomic
	// batch and so one data fsync: "true", "false" or "auto" (the default),
	// which is on exactly when the receiver runs the server itself
	// (NATS_EMBEDDED) and that server syncs always (NATS_SYNC_ALWAYS). On a
	// server that syncs always it carried 91-138% of the ceiling against
	// 64-97% without (docs/benchmarks.md); on a lazy server each batch's
	// staging store costs far more than the fsync it saves (9% of the
	// ceiling). An external server's sync setting is not visible from here:
	// set true for a single server with sync_interval: always (as in
	// docker-compose.yml).
	GroupCommit string `envconfig:"RECEIVER_GROUP_COMMIT" default:"auto" desc:"concurrent deliveries share one JetStream atomic batch, and so one fsync: true, false, or auto (on with an embedded server that syncs always)"`

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

	// Embedded runs nats-server in process on NATS_URL's host:port.
	Embedded bool `envconfig:"NATS_EMBEDDED" default:"false" desc:"run an in-process JetStream server listening on NATS_URL's host:port"`
	// StoreDir is the embedded server's store directory.
	StoreDir string `envconfig:"NATS_STORE_DIR" default:"./var/nats" desc:"store directory of the embedded server"`
	// SyncAlways makes the embedded server fsync before each PubAck.
	SyncAlways bool `envconfig:"NATS_SYNC_ALWAYS" default:"true" desc:"the embedded server fsyncs before each PubAck"`
	// SyncInterval is how often the embedded server syncs its store when it
	// does not sync always. It is set explicitly (nats-server's own default
	// is two minutes): it bounds what a power loss takes from a lazy server
	// without the write-ahead log. The log does not rely on it: it syncs
	// the store itself before it trims (stream.StoreSyncer).
	SyncInterval time.Duration `envconfig:"NATS_SYNC_INTERVAL" default:"100ms" desc:"how often the embedded server syncs its store when NATS_SYNC_ALWAYS=false"`

	// WALDir turns the write-ahead log on (internal/wal): every delivery
	// is written there with a synced commit that concurrent deliveries
	// share, alongside its publish, and answered 2xx only once both are
	// done. With it the stream may sync lazily and a 2xx still means the
	// delivery is on stable storage. Empty: off.
	WALDir string `envconfig:"RECEIVER_WAL_DIR" desc:"directory of the write-ahead log; empty: off"`
	// An entry leaves the log once it is known durable in the stream: its
	// delivery answered, then the embedded server's store synced by the
	// receiver (stream.StoreSyncer). An external server's PubAck is taken
	// as durable: it must sync always (sync_interval: always).
	//
	// WALMaxBytes bounds the log on disk; beyond it deliveries get 503.
	// The log's memtable is a quarter of it (64 MiB at most); values below
	// wal.MinMaxBytes, or below four of the largest bodies, are refused.
	WALMaxBytes int64 `envconfig:"RECEIVER_WAL_MAX_BYTES" default:"2147483648" desc:"size bound of the write-ahead log on disk; beyond it deliveries get 503; at least 4 MiB and four times WEBHOOK_MAX_BODY_BYTES"`
	// WALCommitDelay and WALCommitSiblings: under load (at least that
	// many deliveries in flight) the log waits that long before each
	// fsync so that more deliveries share it (wal.Options.CommitDelay).
	WALCommitDelay    time.Duration `envconfig:"RECEIVER_WAL_COMMIT_DELAY" default:"500us" desc:"how long the write-ahead log waits before an fsync when RECEIVER_WAL_COMMIT_SIBLINGS or more deliveries are in flight, so that more share it; 0: never"`
	WALCommitSiblings int           `envconfig:"RECEIVER_WAL_COMMIT_SIBLINGS" default:"64" desc:"deliveries in flight from which the write-ahead log waits RECEIVER_WAL_COMMIT_DELAY before an fsync"`
}

// Validate reports every invalid setting at once, joined.
func (c Config) Validate() error {
	errs := []error{c.LogConfig.Validate(), c.StreamConfig.Validate(), c.TracingConfig.Validate(), c.QuarantineConfig.Validate()}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		// The value is not repeated: a misplaced secret would be.
		errs = append(errs, errors.New("RECEIVER_LISTEN: is not host:port (e.g. :8080)"))
	}
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
	if _, err := c.GroupCommitOn(); err != nil {
		errs = append(errs, err)
	}
	if c.SyncInterval <= 0 || c.SyncInterval > time.Hour {
		errs = append(errs, fmt.Errorf("NATS_SYNC_INTERVAL: %s must be above 0 and at most 1h", c.SyncInterval))
	}
	if strings.TrimSpace(c.WALDir) != "" {
		// The log holds its memtable (a quarter of the bound) and up to
		// one more being flushed; a bound below what one largest delivery
		// needs would refuse it for ever.
		if least := max(wal.MinMaxBytes, 4*c.MaxBodyBytes); c.WALMaxBytes < least {
			errs = append(errs, fmt.Errorf("RECEIVER_WAL_MAX_BYTES: %d is below %d (4 MiB, and four times WEBHOOK_MAX_BODY_BYTES): the log could not hold its memtable and the largest delivery, and would answer 503 while empty", c.WALMaxBytes, least))
		}
		if c.WALCommitDelay < 0 || c.WALCommitDelay > 100*time.Millisecond {
			errs = append(errs, fmt.Errorf("RECEIVER_WAL_COMMIT_DELAY: %s must be between 0 and 100ms", c.WALCommitDelay))
		}
		if c.WALCommitSiblings < 1 || c.WALCommitSiblings > 1<<20 {
			errs = append(errs, fmt.Errorf("RECEIVER_WAL_COMMIT_SIBLINGS: %d must be between 1 and %d", c.WALCommitSiblings, 1<<20))
		}
	}
	if c.Embedded && strings.TrimSpace(c.StoreDir) == "" {
		errs = append(errs, errors.New("NATS_STORE_DIR: must not be empty with NATS_EMBEDDED=true"))
	}
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

// GroupCommitOn resolves RECEIVER_GROUP_COMMIT (see Config.GroupCommit).
func (c Config) GroupCommitOn() (bool, error) {
	v := strings.ToLower(strings.TrimSpace(c.GroupCommit))
	if v == "auto" || v == "" {
		return c.Embedded && c.SyncAlways, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("RECEIVER_GROUP_COMMIT: %q is not true, false or auto", c.GroupCommit)
	}
	return on, nil
}

// LogConfig and StreamConfig name the embedded parts of Config: both
// packages call their type Config, and Go names an embedded field after its
// type.
type (
	LogConfig     = logs.Config
	StreamConfig  = stream.Config
	TracingConfig = tracing.Config
)

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
