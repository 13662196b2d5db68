package receiver

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/labstack/echo/v4"
)

// Outcomes of a delivery the receiver did not accept, besides those of
// verify, events and stream.
var (
	errTooLarge   = errors.New("payload too large")
	errOverloaded = errors.New("overloaded")
	// errAddressLimit: the sender's address, not trusted yet, holds its
	// share of the bodies read before authentication (admission.go).
	errAddressLimit = errors.New("too many unverified bodies from this address")
	// errEvicted: the body, not verified yet, arrived slowest of a full
	// pool and lost its place to another (admission.go).
	errEvicted = errors.New("evicted from the pool of unverified bodies")
	// errTimeout: the body did not keep RECEIVER_BODY_MIN_RATE or did not
	// arrive within RECEIVER_READ_TIMEOUT.
	errTimeout = errors.New("the body did not arrive in time")
	// errIncomplete: the sender closed or broke the body before its end.
	errIncomplete = errors.New("the body could not be read to its end")
)

// code is how one kind of error is answered.
type code struct {
	status int
	// name is the JSON "error" field.
	name string
	// outcome is the crawlhouse_webhook_deliveries_total label.
	outcome string
	// retryAfter, when set, is the Retry-After header in seconds.
	retryAfter int
}

// codes maps every error a delivery can end with to its answer (the status
// and body a sender sees; README.md lists them).
// Handlers return errors; only httpError writes error bodies.
var codes = map[error]code{
	verify.ErrMissing:     {http.StatusUnauthorized, "invalid_signature", OutcomeInvalidSignature, 0},
	verify.ErrMalformed:   {http.StatusUnauthorized, "invalid_signature", OutcomeInvalidSignature, 0},
	verify.ErrMismatch:    {http.StatusUnauthorized, "invalid_signature", OutcomeInvalidSignature, 0},
	verify.ErrToken:       {http.StatusUnauthorized, "invalid_signature", OutcomeInvalidSignature, 0},
	errTokenSource:        {http.StatusUnauthorized, "invalid_signature", OutcomeInvalidSignature, 0},
	events.ErrInvalid:     {http.StatusBadRequest, "invalid_payload", OutcomeInvalidPayload, 0},
	errTooLarge:           {http.StatusRequestEntityTooLarge, "payload_too_large", OutcomeTooLarge, 0},
	errOverloaded:         {http.StatusTooManyRequests, "overloaded", OutcomeOverloaded, 1},
	errAddressLimit:       {http.StatusTooManyRequests, "overloaded", OutcomeAddressLimit, 1},
	errEvicted:            {http.StatusTooManyRequests, "overloaded", OutcomeEvicted, 1},
	errTimeout:            {http.StatusRequestTimeout, "timeout", OutcomeTimeout, 0},
	errIncomplete:         {http.StatusBadRequest, "invalid_payload", OutcomeInvalidPayload, 0},
	stream.ErrUnavailable: {http.StatusServiceUnavailable, "unavailable", OutcomeUnavailable, 5},
	errNotDurable:         {http.StatusServiceUnavailable, "unavailable", OutcomeUnavailable, 5},
}

// messages replace the error's own text where that text is for operators
// (JetStream's errors), not for the sender.
var messages = map[error]string{
	stream.ErrUnavailable: "JetStream did not confirm the delivery in time; retry later",
	errNotDurable:         "the delivery could not be written to stable storage; retry later",
	errOverloaded:         "too many deliveries or body bytes in progress; retry later",
	errAddressLimit:       "too many deliveries or body bytes in progress from this address before their signature is checked; retry later",
	errEvicted:            "the receiver made room for another delivery: this body arrived slowest of those whose signature is not checked yet; retry",
	errTimeout:            "the body did not arrive at RECEIVER_BODY_MIN_RATE or within RECEIVER_READ_TIMEOUT; retry",
	errIncomplete:         "the body ended before its Content-Length or could not be read",
}

// errorBody is every error answer: {"error":"…","message":"…"}.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// lookup finds err's code; ok is false for errors not in the table.
func lookup(err error) (code, string, bool) {
	for target, c := range codes {
		if errors.Is(err, target) {
			msg, fixed := messages[target]
			if !fixed {
				msg = err.Error()
			}
			return c, msg, true
		}
	}
	return code{}, "", false
}

// httpError is echo's error handler: it answers every error, from the
// delivery handler and from echo's router alike, from the table. Errors
// not in it are internal: logged here, once, and answered 500 without
// their text.
func (s *Server) httpError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if cd, msg, ok := lookup(err); ok {
		if cd.retryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(cd.retryAfter))
		}
		_ = ops.WriteJSON(c.Response(), cd.status, errorBody{cd.name, msg})
		return
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code < http.StatusInternalServerError {
		name := "not_found"
		if he.Code == http.StatusMethodNotAllowed {
			name = "method_not_allowed"
		} else if he.Code != http.StatusNotFound {
			name = "bad_request"
		}
		_ = ops.WriteJSON(c.Response(), he.Code, errorBody{name, http.StatusText(he.Code)})
		return
	}
	s.log.Error().Err(err).Str("path", c.Path()).Msg("internal error")
	_ = ops.WriteJSON(c.Response(), http.StatusInternalServerError, errorBody{"internal", "internal error"})
}
