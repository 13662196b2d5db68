package receiver

import (
	"context"
	"errors"
	"fmt"
	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/wal"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Publisher stores a delivery durably and says whether it was a duplicate.
// *stream.Publisher is the implementation; every error it returns wraps
// stream.ErrUnavailable.
type Publisher interface {
	Publish(ctx context.Context, env *delivery.Envelope) (stream.Ack, error)
}

var _ Publisher = (*stream.Publisher)(nil)

// Server is the receiver's HTTP side: the delivery endpoint, its
// admission, verification and quarantine, and the operational endpoints.
// The binary (internal/receivercmd) builds one with New, serves Handler,
// and runs Prepare and RunQuarantine beside it.
type Server struct {
	cfg      Config
	log      zerolog.Logger
	verifier *verify.Verifier // nil: no secret; only tokens or unsigned deliveries
	// tokens authenticate unsigned deliveries by a shared token (token.go);
	// nil while WEBHOOK_TOKENS is empty.
	tokens *tokenAuth
	// quarantine keeps refused deliveries (quarantine.go); nil: off.
	quarantine *quarantine
	pub        Publisher
	js         jetstream.JetStream
	metrics    *metrics
	inflight   chan struct{}
	// sigHeaders are the headers a signature is taken from (one or two).
	sigHeaders []string
	// budget bounds the body bytes held by all deliveries in progress.
	budget *byteBudget
	// admission bounds the bodies read before their signature is checked
	// (admission.go); refusals logs what it and the signature refuse.
	admission *admission
	refusals  *refusalLog
	// ensured is set once the stream exists (see ensureStream).
	ensured atomic.Bool
	// ready is set once the stream exists and the write-ahead log, if
	// any, has been replayed into it: /readyz answers 200 from then on.
	ready atomic.Bool
	now   func() time.Time
	// deadlines bound each publish by RECEIVER_PUBLISH_TIMEOUT.
	deadlines *publishDeadlines
	// traces.Tracer is nil when tracing is off (internal/tracing).
	traces tracing.Deliveries
}

// ipExtractor is how c.RealIP() finds the client address that is logged:
// the connection's peer, unless that peer is one of RECEIVER_TRUSTED_PROXIES,
// whose X-Forwarded-For is then believed (up to the nearest address not
// trusted). echo trusts loopback, link-local and private peers by default;
// here only the configured ranges are.
func (s *Server) ipExtractor() echo.IPExtractor {
	ranges, _ := s.cfg.trustedProxies() // checked by Validate
	if len(ranges) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, r := range ranges {
		opts = append(opts, echo.TrustIPRange(r))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// Deps are what a Server works with besides its configuration.
type Deps struct {
	Log zerolog.Logger
	// Publisher stores the deliveries (a *stream.Publisher, or Durable's).
	Publisher Publisher
	// JetStream answers /readyz and takes the quarantine; nil in tests
	// that need neither.
	JetStream jetstream.JetStream
	// Registry and Metrics are the registry the receiver's metrics go to
	// and the handler that serves it on /metrics (ops.NewRegistry); a
	// registry of its own when nil.
	Registry *prometheus.Registry
	Metrics  http.Handler
	// Tracer makes the deliveries' spans; nil: tracing off.
	Tracer trace.Tracer
}

// New builds the HTTP side from a validated configuration. With
// cfg.Quarantine, refused deliveries are queued for RunQuarantine.
func New(cfg Config, auth Auth, d Deps) *Server {
	if d.Registry == nil {
		d.Registry, d.Metrics = ops.NewRegistry()
	}
	budget := newByteBudget(cfg.MaxInflightBytes)
	adm := newAdmission(cfg, time.Now)
	s := &Server{
		cfg:        cfg,
		log:        d.Log,
		verifier:   auth.verifier,
		tokens:     auth.tokens,
		pub:        d.Publisher,
		js:         d.JetStream,
		metrics:    newMetrics(d.Registry, d.Metrics, budget, adm),
		inflight:   make(chan struct{}, cfg.MaxInflight),
		budget:     budget,
		admission:  adm,
		refusals:   newRefusalLog(d.Log, time.Now),
		sigHeaders: cfg.SignatureHeaders(),
		now:        time.Now,
		deadlines:  newPublishDeadlines(cfg.PublishTimeout),
	}
	if cfg.Quarantine {
		s.quarantine = newQuarantine(cfg.QuarantineConfig, cfg.Replicas, d.Log, d.Registry)
	}
	senders, _ := cfg.traceTrustedSenders() // checked by Validate
	s.traces = tracing.Deliveries{Tracer: d.Tracer, TrustedSenders: senders}
	if d.Tracer != nil {
		// Off, the publish is not wrapped: a delivery's context holds no
		// span to carry.
		s.pub = tracedPublisher{d.Publisher}
	}
	return s
}

// Handler serves the delivery endpoint (POST WEBHOOK_PATH) and the
// operational ones (/healthz, /readyz, /metrics).
func (s *Server) Handler() http.Handler { return s.routes() }

// RunQuarantine writes the refused deliveries New queued into their
// quarantine streams until ctx is done; what is still queued then is not
// kept. It returns at once when the quarantine is off.
func (s *Server) RunQuarantine(ctx context.Context) {
	if s.quarantine != nil {
		s.quarantine.run(ctx, s.js)
	}
}

// Prepare makes the receiver ready: it creates the stream (retrying until
// JetStream answers), replays what the write-ahead log w holds into it
// through pub, and only then answers /readyz 200; it then trims w until ctx
// is done. w nil: no log, ready once the stream exists.
func (s *Server) Prepare(ctx context.Context, w *wal.WAL, pub Publisher) {
	s.ensureStream(ctx, s.js)
	if w == nil || ctx.Err() != nil {
		s.ready.Store(ctx.Err() == nil)
		return
	}
	// Ready once the log's leftovers are back in the stream; trimming
	// starts only then (see wal.WAL.Replay).
	if err := s.replayWAL(ctx, w, pub); err != nil {
		return // ctx is done
	}
	s.ready.Store(true)
	w.Run(ctx, walTrimEvery, s.log)
}

// walTrimEvery is how often the write-ahead log is trimmed, each time
// after one sync of the stream's store: often enough that the log holds
// about a memtable's worth at peak, rare enough that those syncs cost
// little beside the log's own.
const walTrimEvery = 100 * time.Millisecond

// ensureStream creates or updates the stream and its object store, retrying
// until it succeeds: JetStream may come up after the receiver. Deliveries
// meanwhile answer 503 and /readyz says not ready.
func (s *Server) ensureStream(ctx context.Context, js jetstream.JetStream) {
	schedule := backoff.Exponential{First: 250 * time.Millisecond, Max: 5 * time.Second}
	err := backoff.Retry(ctx, schedule, func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := stream.EnsureStream(cctx, js, s.cfg.StreamConfig)
		return err
	}, func(_ int, err error, wait time.Duration) bool {
		s.log.Warn().Err(err).Dur("retry_in", wait).Msg("stream not created yet")
		return true
	})
	if err != nil {
		return // ctx is done
	}
	s.ensured.Store(true)
	s.log.Info().Str("stream", s.cfg.Stream).Strs("subjects", s.cfg.Subjects()).Msg("stream ready")
}

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.httpError
	e.IPExtractor = s.ipExtractor()
	e.POST(s.cfg.Path, s.handleDelivery)
	// The operational endpoints are both binaries' (internal/ops); the
	// rest, unknown paths included, is answered from the table (errors.go).
	serveOps := echo.WrapHandler(ops.Handler(s.metrics, s.readiness, 2*time.Second))
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		e.GET(path, serveOps)
	}
	return e
}

// handleDelivery takes one webhook delivery. The order of work is fixed:
// admission and size limit, signature over the raw bytes (no JSON is
// parsed before it), an in-flight slot, validation, publish and PubAck,
// answer. It answers 200 only after
// JetStream confirmed the delivery is stored (or was stored before: a
// duplicate); every failure to store answers 503, so the sender retries.
func (s *Server) handleDelivery(c echo.Context) error {
	req, span := tracing.StartDelivery(s.traces, c.Request(), s.cfg.Path)
	c.SetRequest(req)
	outcome, err := s.deliver(c)
	if err != nil && outcome == "" {
		// Not in the table: an internal error, answered 500.
		outcome = OutcomeError
		if cd, _, ok := lookup(err); ok {
			outcome = cd.outcome
		}
	}
	if outcome != "" {
		s.metrics.delivered(outcome)
	}
	tracing.EndDelivery(span, outcome, statusOf(err))
	return err
}

// statusOf is the status code httpError answers err with (200 for nil).
func statusOf(err error) int {
	if err == nil {
		return http.StatusOK
	}
	if cd, _, ok := lookup(err); ok {
		return cd.status
	}
	return http.StatusInternalServerError
}

func (s *Server) deliver(c echo.Context) (string, error) {
	// The client's address, resolved once (through RECEIVER_TRUSTED_PROXIES)
	// for admission, verification, tracing, the quarantine and the logs.
	req, remote := c.Request(), c.RealIP()
	// The body's bytes are held against RECEIVER_MAX_INFLIGHT_BYTES until
	// the answer: released here on every path.
	res := reservation{b: s.budget}
	defer res.releaseAll()
	buf, signed, err := s.receive(c, remote, &res)
	if err != nil {
		return "", err
	}
	// The buffer goes back to the pool once the delivery is answered
	// without being published, or once JetStream has acknowledged it (the
	// client library no longer holds the bytes then). After a failed
	// publish it is left to the GC: the bytes may still sit in the
	// connection's outgoing buffer.
	reuse := true
	defer func() {
		if reuse {
			putBody(buf)
		}
	}()
	body := *buf
	// The delivery's span starts here, once it is let through. A sender's
	// trace context is weighed only when its signature bound it to the
	// body: a shared token or an unsigned delivery gets a new trace.
	// With tracing off nothing is looked up in the request's context.
	tracingOn := s.traces.Tracer != nil
	if tracingOn {
		traceFrom := ""
		if signed {
			traceFrom = remote
		}
		req = tracing.Verified(req, traceFrom)
	}
	// Only a verified delivery takes one of the RECEIVER_MAX_INFLIGHT
	// slots, so no unsigned request can hold one.
	select {
	case s.inflight <- struct{}{}:
		s.metrics.inflight.Inc()
		defer func() { <-s.inflight; s.metrics.inflight.Dec() }()
	default:
		return "", errOverloaded
	}
	head, err := events.Validate(body)
	if err != nil {
		s.log.Warn().Err(err).Str("remote", remote).Msg("delivery refused: payload")
		s.quarantine.keep(ClassInvalid, req.Header, s.sigHeaders, body, remote, s.authOf(signed), err)
		return "", err
	}

	if tracingOn {
		tracing.Delivery(req.Context(), head.WebhookID, head.CrawlID, head.Type, len(body))
	}

	env := delivery.NewEnvelope(s.cfg.SubjectPrefix, head, body, s.now())
	// The publish is bounded by RECEIVER_PUBLISH_TIMEOUT alone: a sender
	// that hangs up meanwhile does not cut it short (its retry is a
	// duplicate either way). Without tracing the deadline is shared with
	// the deliveries that started about when this one did (deadline.go);
	// with it, the context keeps the request's values (the span).
	start := time.Now()
	var ctx context.Context
	if tracingOn {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(req.Context()), s.cfg.PublishTimeout)
		defer cancel()
	} else {
		ctx = s.deadlines.context(start)
	}
	ack, err := s.pub.Publish(ctx, env)
	s.metrics.publish.Observe(time.Since(start).Seconds())
	if err != nil {
		reuse = false
		s.log.Error().Err(err).Str("webhook_id", head.WebhookID).Str("crawl_id", head.CrawlID).Str("type", head.Type).
			Dur("waited", time.Since(start)).Msg("delivery not stored")
		return "", err
	}
	status := OutcomeAccepted
	if ack.Duplicate {
		status = OutcomeDuplicate
	}
	if e := s.log.Debug(); e.Enabled() {
		e.Str("webhook_id", head.WebhookID).Str("crawl_id", head.CrawlID).Str("type", head.Type).
			Str("status", status).Uint64("seq", ack.Sequence).Int("bytes", len(body)).Msg("delivery stored")
	}
	return status, writeAccepted(c, status, head.WebhookID)
}

// writeAccepted writes the 200 answer, {"status":…,"webhookId":…}, without
// the encoder: both values are plain ASCII (an outcome name, a canonical
// UUID). The Content-Type is set from one shared value, not a new one for
// every answer (net/http copies the header map before writing it).
func writeAccepted(c echo.Context, status, webhookID string) error {
	var a [96]byte
	b := append(a[:0], `{"status":"`...)
	b = append(b, status...)
	b = append(b, `","webhookId":"`...)
	b = append(b, webhookID...)
	b = append(b, "\"}\n"...)
	w := c.Response()
	w.Header()[echo.HeaderContentType] = contentTypeJSON
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(b)
	return err
}

// contentTypeJSON is the Content-Type of every 200 answer. A header value
// of length and capacity one: appending to it makes a new array.
var contentTypeJSON = []string{echo.MIMEApplicationJSON}

// receive does what comes before the sender is known to hold a secret,
// for the client at remote (c.RealIP, resolved once by the caller):
// it admits the request (admission.go), reads its body at the minimum rate
// (pace.go) and checks the signature. Every refusal on the way is logged
// at a bounded rate (refusals.go); a refused body is not read further.
// signed says the body's signature verified (not a shared token, not
// WEBHOOK_ALLOW_UNSIGNED).
func (s *Server) receive(c echo.Context, remote string, res *reservation) (_ *[]byte, signed bool, _ error) {
	req := c.Request()
	cl, err := s.admission.admit(senderOf(remote), res, c.Response())
	if err != nil {
		refuse(c.Response())
		s.refused(remote, err)
		return nil, false, err
	}
	defer cl.release(res)
	body := newPacedBody(req.Body, req.ContentLength, c.Response(), s.cfg, s.now(), cl)
	buf, err := s.readBody(req, body, res)
	if err != nil {
		refuse(c.Response())
		s.refused(remote, err)
		return nil, false, err
	}
	body.done()
	signed, err = s.verify(req.Header, remote, *buf)
	if err != nil {
		if errors.Is(err, verify.ErrMismatch) {
			// Well-formed but unknown to every secret: kept for a redrive
			// once the secret is right.
			s.quarantine.keep(ClassUnverified, req.Header, s.sigHeaders, *buf, remote, authNone, err)
		}
		putBody(buf)
		s.refused(remote, err)
		return nil, false, err
	}
	cl.verified()
	return buf, signed, nil
}

// refused logs a refusal before authentication (at a bounded rate).
func (s *Server) refused(remote string, err error) {
	outcome := OutcomeError
	if cd, _, ok := lookup(err); ok {
		outcome = cd.outcome
	}
	s.refusals.refused(outcome, remote, err)
}

// bodies pools request buffers. Buffers above MaxPooledBody are not kept,
// so one large delivery does not pin its memory.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

// MaxPooledBody is the largest buffer kept in the pool.
const MaxPooledBody = 1 << 20

// FirstChunk is the most a body's buffer starts with: it grows from there
// as bytes arrive (doubling, so a large body costs few copies), never on
// the word of Content-Length alone.
const FirstChunk = 64 << 10

func putBody(b *[]byte) {
	if cap(*b) <= MaxPooledBody {
		bodies.Put(b)
	}
}

// readBody reads at most MaxBodyBytes; a longer body is errTooLarge, told by
// Content-Length before reading when the sender declares it. The buffer
// comes from the pool (see putBody) and grows only as bytes arrive; every
// byte of its capacity is taken from the budget into res first, and a body
// that cannot get its bytes is errOverloaded (errAddressLimit past its
// sender's share). r is req's body as it is to be read. The caller
// releases res.
func (s *Server) readBody(req *http.Request, r io.Reader, res *reservation) (*[]byte, error) {
	limit := s.cfg.MaxBodyBytes
	if req.ContentLength > limit {
		return nil, errTooLarge
	}
	// One byte past the limit tells a body that is too long; one past an
	// announced length lets the read end on EOF without growing again.
	ceiling := limit + 1
	if req.ContentLength >= 0 {
		ceiling = req.ContentLength + 1
	}
	// A body not verified yet starts small (admission.go): its buffer
	// follows the bytes that arrive.
	first, most := int64(FirstChunk), ceiling+FirstChunk
	if res.claim != nil {
		first, most = UnverifiedChunk, UnverifiedChunk
	}
	buf := bodies.Get().(*[]byte)
	if c := int64(cap(*buf)); c == 0 || c > most {
		// Nothing pooled, or more than this body may take yet: the
		// budget counts capacity, so start small instead (and leave the
		// larger buffer to another body).
		if c > 0 {
			bodies.Put(buf)
			buf = new([]byte)
		}
		*buf = nil
	}
	*buf = (*buf)[:0]
	if err := res.grow(int64(cap(*buf))); err != nil {
		putBody(buf)
		return nil, err
	}
	body, err := s.readGrowing(io.LimitReader(r, limit+1), *buf, first, ceiling, limit+1, res)
	*buf = body
	if err != nil {
		putBody(buf)
		if errors.Is(err, errOverloaded) || errors.Is(err, errAddressLimit) || errors.Is(err, errEvicted) {
			return nil, err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errTimeout
		}
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, errTooLarge
		}
		return nil, fmt.Errorf("%w: %v", errIncomplete, err)
	}
	if int64(len(body)) > limit {
		putBody(buf)
		return nil, errTooLarge
	}
	return buf, nil
}

// readGrowing reads r to its end into b, growing b as bytes arrive: to
// first, then doubling, up to ceiling (the announced length plus one)
// and past it, should more arrive, up to hardCap. Each growth takes the new
// capacity from res before allocating and gives the old one back after the
// copy.
func (s *Server) readGrowing(r io.Reader, b []byte, first, ceiling, hardCap int64, res *reservation) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			have := int64(cap(b))
			if have >= hardCap {
				// Only LimitReader's extra byte can fill it: too large,
				// which the caller tells by the length.
				return b, nil
			}
			limit := ceiling
			if have >= ceiling {
				limit = hardCap
			}
			want := max(2*have, first)
			if want >= limit-first {
				// Land on the limit itself, not just short of it: a body of
				// exactly the announced length then needs no last copy.
				want = limit
			}
			want = max(min(want, limit), have+1)
			if err := res.grow(want); err != nil {
				return b, err
			}
			nb := make([]byte, len(b), want)
			copy(nb, b)
			b = nb
			res.shrink(have)
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// verify authenticates a delivery from remote. A signature in the
// configured headers (see Config.SignatureHeaders) decides whenever one is
// present and secrets are set: a valid one in any of them is enough, and
// signed is true. A delivery without one passes with
// WEBHOOK_ALLOW_UNSIGNED=true, or with a shared token when WEBHOOK_TOKENS
// is set (token.go); otherwise it is refused (verify.ErrMissing).
func (s *Server) verify(h http.Header, remote string, body []byte) (signed bool, err error) {
	var vals [2]string
	present := false
	for i, name := range s.sigHeaders {
		vals[i] = h.Get(name)
		present = present || vals[i] != ""
	}
	switch {
	case present && s.verifier != nil:
		err := s.verifier.VerifyAny(body, vals[:len(s.sigHeaders)]...)
		return err == nil, err
	case s.cfg.AllowUnsigned:
		return false, nil
	case s.tokens != nil:
		return false, s.tokens.check(h, remote)
	}
	return false, verify.ErrMissing
}

// authOf names how a delivery that passed verify was authenticated.
func (s *Server) authOf(signed bool) string {
	switch {
	case signed:
		return authSignature
	case s.cfg.AllowUnsigned:
		return authUnsigned
	}
	return authToken
}

// readiness is the receiver's one check, "jetstream": ready once the
// stream exists, the write-ahead log (if any) has been replayed into it,
// and JetStream answers for it.
func (s *Server) readiness(ctx context.Context) map[string]error {
	var err error
	switch {
	case !s.ensured.Load():
		err = errStreamNotCreated
	case !s.ready.Load():
		err = errWALNotReplayed
	default:
		if rerr := stream.Ready(ctx, s.js, s.cfg.StreamConfig); rerr != nil {
			s.log.Warn().Err(rerr).Msg("not ready")
			err = errJetStreamDown
		}
	}
	return map[string]error{"jetstream": err}
}

// The reasons /readyz gives; JetStream's own error is logged, not served.
var (
	errStreamNotCreated = errors.New("stream not created yet")
	errWALNotReplayed   = errors.New("write-ahead log not replayed yet")
	errJetStreamDown    = errors.New("JetStream does not answer")
)
