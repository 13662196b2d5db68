package reader

import (
	"errors"
	"net/http"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/labstack/echo/v4"
)

// errUnauthorized: no token, or none of the configured ones.
var errUnauthorized = errors.New("a bearer token is required (Authorization: Bearer <token>)")

// errNotFound: a path the API does not serve.
var errNotFound = errors.New("no such endpoint")

// errBusy and errExportsBusy: the requests, or the exports, in progress
// are as many as the reader serves at once.
var (
	errBusy        = errors.New("the reader is answering as many requests as it serves at once (READER_MAX_INFLIGHT); retry later")
	errExportsBusy = errors.New("the reader is writing as many exports as it serves at once (READER_MAX_EXPORTS); retry later")
)

// ErrorBody is every error answer of the API (the OpenAPI document's
// Error): error is a code callers branch on, parameter names the query
// parameter at fault (invalid_parameter only), message says what to do.
type ErrorBody struct {
	Error     string `json:"error"`
	Parameter string `json:"parameter,omitempty"`
	Message   string `json:"message"`
}

// code is how one kind of error is answered; retryAfter, in seconds,
// goes into a Retry-After header when set.
type code struct {
	status     int
	name       string
	retryAfter string
}

// codes maps the errors a request can end with to their answer; handlers
// return errors and only httpError writes error bodies. Anything else is
// a 500, logged once here.
var codes = []struct {
	err error
	code
}{
	{errUnauthorized, code{http.StatusUnauthorized, "unauthorized", ""}},
	{verify.ErrToken, code{http.StatusUnauthorized, "unauthorized", ""}},
	{errNotFound, code{http.StatusNotFound, "not_found", ""}},
	{query.ErrNoPage, code{http.StatusNotFound, "not_found", ""}},
	{query.ErrNoVersion, code{http.StatusNotFound, "not_found", ""}},
	{archive.ErrNoCrawl, code{http.StatusNotFound, "not_found", ""}},
	{query.ErrOneVersion, code{http.StatusNotFound, "not_found", ""}},
	{query.ErrLimit, code{http.StatusUnprocessableEntity, "query_limit", ""}},
	{query.ErrBusy, code{http.StatusTooManyRequests, "overloaded", "1"}},
	{query.ErrNoHTTP, code{http.StatusNotImplemented, "not_configured", ""}},
	{errBusy, code{http.StatusTooManyRequests, "overloaded", "1"}},
	{errExportsBusy, code{http.StatusTooManyRequests, "overloaded", "30"}},
}

// httpError is echo's error handler: the one place error bodies are
// written.
func (s *Server) httpError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	body, status := s.answer(err, c)
	if status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="crawlhouse"`)
	}
	_ = ops.WriteJSON(c.Response(), status, body)
}

func (s *Server) answer(err error, c echo.Context) (ErrorBody, int) {
	var pe *query.ParamError
	if errors.As(err, &pe) {
		return ErrorBody{Error: "invalid_parameter", Parameter: pe.Param, Message: pe.Error()}, http.StatusBadRequest
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			err = errNotFound
		case http.StatusMethodNotAllowed:
			return ErrorBody{Error: "method_not_allowed", Message: "the API only reads: GET"}, he.Code
		}
	}
	for _, e := range codes {
		if errors.Is(err, e.err) {
			if e.retryAfter != "" {
				c.Response().Header().Set("Retry-After", e.retryAfter)
			}
			return ErrorBody{Error: e.name, Message: err.Error()}, e.status
		}
	}
	if archive.Classify(err) != archive.Refused {
		s.log.Warn().Err(err).Str("route", c.Path()).Msg("ClickHouse unavailable")
		c.Response().Header().Set("Retry-After", "5")
		return ErrorBody{Error: "unavailable", Message: "the archive is unavailable; retry later"}, http.StatusServiceUnavailable
	}
	s.log.Error().Err(err).Str("route", c.Path()).Msg("request failed")
	return ErrorBody{Error: "internal", Message: "internal error (logged)"}, http.StatusInternalServerError
}
