package reader

import (
	"context"
	"errors"
	"net/http"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
)

// Outcomes of a request that the reader answers apart, besides the
// archive's (query.ErrNoPage, query.ErrLimit, query.ErrBusy, …).
var (
	// ErrUnauthorized: no token, or none of the configured ones.
	ErrUnauthorized = errors.New("a bearer token is required (Authorization: Bearer <token>)")
	// ErrNoRoute: a path that neither the API nor the pages serve.
	ErrNoRoute = errors.New("nothing is served at this path")
	// ErrBusy and ErrExportsBusy: the requests, or the exports, in
	// progress are as many as the reader serves at once.
	ErrBusy        = errors.New("the reader is answering as many requests as it serves at once (READER_MAX_INFLIGHT); retry later")
	ErrExportsBusy = errors.New("the reader is writing as many exports as it serves at once (READER_MAX_EXPORTS); retry later")
	// ErrDeadline: the request ran past READER_REQUEST_MAX_TIME, its
	// deadline as a whole (exports aside).
	ErrDeadline = errors.New("the request took longer than the reader gives one (READER_REQUEST_MAX_TIME); narrow it (a job, a host, a time range) or retry later")
)

// ErrorBody is every error answer of the API (the OpenAPI document's
// Error): error is a code callers branch on, parameter names the query
// parameter at fault (invalid_parameter only), message says what to do.
type ErrorBody struct {
	Error     string `json:"error"`
	Parameter string `json:"parameter,omitempty"`
	Message   string `json:"message"`
}

// Outcome is how the reader answers a request that ended in an error: the
// same status, code and Retry-After whether the API writes it (JSON,
// ErrorBody) or the web pages do (an HTML page).
type Outcome struct {
	Status int
	// Code is ErrorBody.Error; Parameter names the parameter at fault
	// (invalid_parameter only).
	Code      string
	Parameter string
	// Message says what happened and what to do; it holds nothing of an
	// internal error (which is logged instead).
	Message string
	// RetryAfter, in seconds, goes into a Retry-After header when set.
	RetryAfter string
	// Log is the level the error is logged at by whoever writes the
	// answer, once; zerolog.Disabled: not logged.
	Log zerolog.Level
}

// code is one row of the table: a kind of error and its answer.
type code struct {
	err        error
	status     int
	name       string
	retryAfter string
	// advice is added to the error's text: what to do.
	advice string
	// own: the message is the sentinel's text alone, not the error's
	// (which may say more than a client should read); warn: the error is
	// logged as a warning.
	own, warn bool
}

// codes maps the errors a request can end with to their answer (docs/
// read-api.md, "Errors", is this table). Handlers of the API and of the
// pages return errors; only OutcomeOf decides how they are answered.
var codes = []code{
	{err: ErrUnauthorized, status: http.StatusUnauthorized, name: "unauthorized"},
	{err: verify.ErrToken, status: http.StatusUnauthorized, name: "unauthorized"},
	{err: ErrNoRoute, status: http.StatusNotFound, name: "not_found"},
	{err: query.ErrNoPage, status: http.StatusNotFound, name: "not_found"},
	{err: query.ErrNoVersion, status: http.StatusNotFound, name: "not_found"},
	{err: archive.ErrNoCrawl, status: http.StatusNotFound, name: "not_found"},
	{err: query.ErrOneVersion, status: http.StatusNotFound, name: "not_found"},
	{err: query.ErrLimit, status: http.StatusUnprocessableEntity, name: "query_limit", advice: "narrow it (a job, a host, a time range) and try again"},
	{err: query.ErrBusy, status: http.StatusTooManyRequests, name: "overloaded", retryAfter: "1"},
	{err: ErrBusy, status: http.StatusTooManyRequests, name: "overloaded", retryAfter: "1"},
	{err: ErrExportsBusy, status: http.StatusTooManyRequests, name: "overloaded", retryAfter: "30"},
	{err: ErrDeadline, status: http.StatusGatewayTimeout, name: "timeout", own: true, warn: true},
	{err: query.ErrNoHTTP, status: http.StatusNotImplemented, name: "not_configured"},
}

// StatusClientClosed is the status logged for a request whose client left
// before its answer (nginx's 499): nobody reads it.
const StatusClientClosed = 499

// OutcomeOf is the answer to a request of ctx that ended with err: the
// one table of the reader's error answers. In order: a parameter that
// cannot be used (400 naming it); an error of the table (codes); a client
// that left (499, not logged) or a request past its deadline (504); then
// ClickHouse unreachable or not answering (503 with Retry-After, logged
// as a warning); anything else is a 500, logged as an error and not
// shown.
func OutcomeOf(ctx context.Context, err error) Outcome {
	var pe *query.ParamError
	if errors.As(err, &pe) {
		return Outcome{Status: http.StatusBadRequest, Code: "invalid_parameter", Parameter: pe.Param, Message: "parameter " + pe.Error(), Log: zerolog.Disabled}
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.outcome(err)
		}
	}
	switch ctx.Err() {
	case context.Canceled:
		return Outcome{Status: StatusClientClosed, Code: "client_closed", Message: "the client left before the answer", Log: zerolog.Disabled}
	case context.DeadlineExceeded:
		return OutcomeOf(ctx, ErrDeadline)
	}
	if archive.Classify(err) != archive.Refused {
		return Outcome{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the archive is unavailable; retry later", RetryAfter: "5", Log: zerolog.WarnLevel}
	}
	return Outcome{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error (logged)", Log: zerolog.ErrorLevel}
}

func (c code) outcome(err error) Outcome {
	o := Outcome{Status: c.status, Code: c.name, Message: err.Error(), RetryAfter: c.retryAfter, Log: zerolog.Disabled}
	if c.own {
		o.Message = c.err.Error()
	}
	if c.advice != "" {
		o.Message += "; " + c.advice
	}
	if c.warn {
		o.Log = zerolog.WarnLevel
	}
	return o
}

// Body is the API's JSON body of o.
func (o Outcome) Body() ErrorBody {
	return ErrorBody{Error: o.Code, Parameter: o.Parameter, Message: o.Message}
}

// Headers sets the headers every answer of o carries, JSON or page.
func (o Outcome) Headers(h http.Header) {
	if o.RetryAfter != "" {
		h.Set("Retry-After", o.RetryAfter)
	}
	if o.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="crawlhouse"`)
	}
}

// LogTo logs err of o once, at o's level, with where it happened.
func (o Outcome) LogTo(log zerolog.Logger, err error, route string) {
	if o.Log == zerolog.Disabled {
		return
	}
	msg := "request failed"
	if o.Status == http.StatusServiceUnavailable {
		msg = "ClickHouse unavailable"
	} else if o.Status == http.StatusGatewayTimeout {
		msg = "request past its deadline"
	}
	log.WithLevel(o.Log).Err(err).Str("route", route).Int("status", o.Status).Msg(msg)
}

// httpError is echo's error handler and the API routes' (observe): the one
// place the API writes error bodies.
func (s *Server) httpError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	o := s.outcome(err, c)
	o.Headers(c.Response().Header())
	_ = ops.WriteJSON(c.Response(), o.Status, o.Body())
}

// pageError answers an error of a route of the pages (the reader's own:
// too many in progress) as the pages answer theirs: a page.
func (s *Server) pageError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	s.pages.Fail(c.Response(), c.Request(), err)
}

// outcome is OutcomeOf an error of the API's request c, logged once here;
// echo's own errors (no route, another method than GET) are named first.
func (s *Server) outcome(err error, c echo.Context) Outcome {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			err = ErrNoRoute
		case http.StatusMethodNotAllowed:
			return Outcome{Status: he.Code, Code: "method_not_allowed", Message: "the API only reads: GET", Log: zerolog.Disabled}
		default:
			return Outcome{Status: he.Code, Code: "invalid_request", Message: http.StatusText(he.Code), Log: zerolog.Disabled}
		}
	}
	o := OutcomeOf(c.Request().Context(), err)
	o.LogTo(s.log, err, c.Path())
	return o
}
