package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Publisher stores a delivery durably and says whether it was a duplicate.
// *stream.Publisher is the implementation; every error it returns wraps
// stream.ErrUnavailable.
type Publisher interface {
	Publish(ctx context.Context, env *events.Envelope) (stream.Ack, error)
}

var _ Publisher = (*stream.Publisher)(nil)

// server is the receiver's HTTP side.
type server struct {
	cfg      Config
	log      zerolog.Logger
	verifier *verify.Verifier // nil: unsigned deliveries allowed, none checked
	pub      Publisher
	js       jetstream.JetStream
	metrics  *metrics
	inflight chan struct{}
	// ensured is set once the stream exists (see ensureStream).
	ensured atomic.Bool
	now     func() time.Time
}

// accepted is the 200 answer.
type accepted struct {
	Status    string `json:"status"`
	WebhookID string `json:"webhookId"`
}

func (s *server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.httpError
	e.POST(s.cfg.Path, s.handleDelivery)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.handleReady)
	e.GET("/metrics", echo.WrapHandler(s.metrics))
	return e
}

// handleDelivery takes one webhook delivery. The order of work is SPEC §3's:
// size limit, signature over the raw bytes (no JSON is parsed before it),
// validation, publish and PubAck, answer. It answers 200 only after
// JetStream confirmed the delivery is stored (or was stored before: a
// duplicate); every failure to store answers 503, so the sender retries.
func (s *server) handleDelivery(c echo.Context) error {
	outcome, err := s.deliver(c)
	if err != nil && outcome == "" {
		// Not in the table: an internal error, answered 500.
		outcome = outcomeError
		if cd, _, ok := lookup(err); ok {
			outcome = cd.outcome
		}
	}
	if outcome != "" {
		s.metrics.delivered(outcome)
	}
	return err
}

func (s *server) deliver(c echo.Context) (string, error) {
	select {
	case s.inflight <- struct{}{}:
		s.metrics.inflight.Inc()
		defer func() { <-s.inflight; s.metrics.inflight.Dec() }()
	default:
		return "", errOverloaded
	}
	req := c.Request()
	body, err := s.readBody(req)
	if err != nil {
		return "", err
	}
	if err := s.verify(req.Header.Get(s.cfg.SignatureHeader), body); err != nil {
		s.log.Warn().Err(err).Str("remote", c.RealIP()).Msg("delivery refused: signature")
		return "", err
	}
	head, err := events.Validate(body)
	if err != nil {
		s.log.Warn().Err(err).Str("remote", c.RealIP()).Msg("delivery refused: payload")
		return "", err
	}
	log := s.log.With().Str("webhook_id", head.WebhookID).Str("crawl_id", head.CrawlID).Str("type", head.Type).Logger()

	env := events.NewEnvelope(s.cfg.SubjectPrefix, head, body, s.now())
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.PublishTimeout)
	defer cancel()
	start := time.Now()
	ack, err := s.pub.Publish(ctx, env)
	s.metrics.publish.Observe(time.Since(start).Seconds())
	if err != nil {
		log.Error().Err(err).Dur("waited", time.Since(start)).Msg("delivery not stored")
		return "", err
	}
	status := outcomeAccepted
	if ack.Duplicate {
		status = outcomeDuplicate
	}
	log.Debug().Str("status", status).Uint64("seq", ack.Sequence).Int("bytes", len(body)).Msg("delivery stored")
	return status, writeJSON(c, http.StatusOK, accepted{Status: status, WebhookID: head.WebhookID})
}

// readBody reads at most MaxBodyBytes; a longer body is errTooLarge, told by
// Content-Length before reading when the sender declares it.
func (s *server) readBody(req *http.Request) ([]byte, error) {
	limit := s.cfg.MaxBodyBytes
	if req.ContentLength > limit {
		return nil, errTooLarge
	}
	size := int64(512)
	if req.ContentLength > 0 {
		size = req.ContentLength + 1
	}
	buf := make([]byte, 0, size)
	body, err := readAll(io.LimitReader(req.Body, limit+1), buf)
	if err != nil {
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
		return nil, errTooLarge
	}
	return body, nil
}

func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
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

// verify checks the signature. With WEBHOOK_ALLOW_UNSIGNED=true a delivery
// without the header passes; one that carries it is still checked when
// secrets are set.
func (s *server) verify(header string, body []byte) error {
	if s.cfg.AllowUnsigned && (s.verifier == nil || header == "") {
		return nil
	}
	return s.verifier.Verify(header, body)
}

// handleReady answers 200 when JetStream answers for the stream.
func (s *server) handleReady(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if !s.ensured.Load() {
		return writeJSON(c, http.StatusServiceUnavailable, errorBody{"unavailable", "stream not created yet"})
	}
	if err := stream.Ready(ctx, s.js, s.cfg.StreamConfig); err != nil {
		s.log.Warn().Err(err).Msg("not ready")
		return writeJSON(c, http.StatusServiceUnavailable, errorBody{"unavailable", "JetStream does not answer"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
