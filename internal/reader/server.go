// Package reader is the read API's HTTP side: search, pages and their
// history and diffs, jobs, the changes feed and exports of the archive,
// as JSON (and streamed files), read-only, over the queries of
// internal/archive. It declares the one read interface (Archive) that the
// API and the web pages (internal/reader/web, mounted through Deps.Pages)
// both read, and the one table of their error answers (OutcomeOf); it
// gives each request a slot and a deadline. It keeps no state between
// requests, so any number of replicas serve alike (their cursors signed
// with one READER_CURSOR_KEY). The binary around it is
// internal/readercmd.
package reader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Archive is what the reader reads, for the API and for the web pages
// alike (internal/reader/web builds its pages from it): query.Reader's
// read queries. Every method only reads; its errors are answered by
// OutcomeOf. Text fields hold crawled content as it was archived:
// hostile, escaped where it is shown.
type Archive interface {
	Search(ctx context.Context, q query.SearchQuery) (query.SearchPage, error)
	Page(ctx context.Context, url, job string, parts query.PageParts) (query.ArchivedPage, error)
	History(ctx context.Context, url string) ([]query.HistoryEntry, error)
	Versions(ctx context.Context, url, fromJob, toJob string) (from, to query.Version, err error)
	// Comparisons is what the changeTracking objects of a page of hits
	// are made of, in one read.
	Comparisons(ctx context.Context, keys []query.VersionKey) (map[query.VersionKey]query.Comparison, error)
	// RemovedBy is the job whose version of url is its latest state for
	// job, when job removed url by absence; nil otherwise.
	RemovedBy(ctx context.Context, url string, job uuid.UUID) (*uuid.UUID, error)
	Jobs(ctx context.Context, q query.JobsQuery) (query.JobsPage, error)
	JobStatus(ctx context.Context, crawlID string, topErrors int) (query.JobStatus, error)
	// JobChanges counts a job's URLs by change class, as the job's change
	// summary does (internal/changes).
	JobChanges(ctx context.Context, crawlID string, q query.ChangeQuery) (query.JobChanges, error)
	// JobsChangeCounts counts, as JobChanges, the URLs of a page of jobs
	// by class, in one read.
	JobsChangeCounts(ctx context.Context, jobs []uuid.UUID) (map[uuid.UUID]query.ChangeCounts, error)
	Failures(ctx context.Context, q query.FailuresQuery) (query.FailuresPage, error)
	Blocked(ctx context.Context, q query.BlockedQuery) (query.BlockedPage, error)
	Changes(ctx context.Context, q query.FeedQuery) (query.ChangesPage, error)
	ExportNDJSON(ctx context.Context, job string, opts query.NDJSONOptions, w io.Writer) (int64, error)
	ExportParquet(ctx context.Context, job string, w io.Writer) (int64, error)
	ExportWARC(ctx context.Context, job string, opts query.WARCOptions, w io.Writer) (int64, error)
	ExportCDXJ(ctx context.Context, job string, opts query.WARCOptions, w io.Writer) (int64, error)
	ExportWACZ(ctx context.Context, job string, w io.Writer) (int64, error)
}

var _ Archive = (*query.Reader)(nil)

// Deps are a Server's dependencies.
type Deps struct {
	Log     zerolog.Logger
	Archive Archive
	// Ping checks ClickHouse for /readyz.
	Ping func(ctx context.Context) error
	// Registry takes the API's metrics, Metrics serves them (ops.NewRegistry).
	Registry *prometheus.Registry
	Metrics  http.Handler
	// Tracer makes a span of each request; nil: none.
	Tracer trace.Tracer
	// Pages are the web pages served under their Base, over the same
	// Archive (internal/reader/web); nil: none.
	Pages Pages
}

// Pages are the web pages the reader serves beside the API: a handler of
// the paths under Base that writes the answer to a request the reader
// ended before it reached them (Fail: too many in progress, past its
// deadline) as a page, from the same OutcomeOf.
type Pages interface {
	http.Handler
	Base() string
	Fail(w http.ResponseWriter, r *http.Request, err error)
}

// Server is the read API.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	archive Archive
	ping    func(ctx context.Context) error
	tokens  *verify.Tokens // nil: open access
	metrics *metrics
	ops     http.Handler
	tracer  trace.Tracer
	// pages are the web pages over the same queries (internal/reader/web);
	// nil: none.
	pages Pages
	// The slots of the requests and of the exports in progress
	// (READER_MAX_INFLIGHT, READER_MAX_EXPORTS).
	inflight, exports chan struct{}
}

// New returns the API of cfg (validated) over d.
func New(cfg Config, d Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Registry == nil {
		d.Registry, d.Metrics = ops.NewRegistry()
	}
	s := &Server{cfg: cfg, log: d.Log, archive: d.Archive, ping: d.Ping, tracer: d.Tracer, pages: d.Pages,
		inflight: make(chan struct{}, cfg.MaxInflight), exports: make(chan struct{}, cfg.MaxExports)}
	s.metrics = newMetrics(d.Registry, s.inflight, s.exports)
	var err error
	if s.tokens, err = cfg.TokenChecker(); err != nil {
		return nil, err
	}
	s.ops = ops.Handler(d.Metrics, s.readiness, 2*time.Second)
	return s, nil
}

func (s *Server) readiness(ctx context.Context) map[string]error {
	return map[string]error{"clickhouse": s.ping(ctx)}
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return s.routes() }

// route is one endpoint: its handler and the query parameters it takes
// (any other is refused, naming it, so that a typo does not silently
// widen an answer).
type route struct {
	path   string
	params []string
	h      echo.HandlerFunc
	// export: the route takes a slot of the exports too.
	export bool
}

// table is every endpoint of the API.
func (s *Server) table() []route {
	return []route{
		{"/v1/search", []string{"q", "job", "kind", "host", "from", "to", "status", "change", "order", "limit", "cursor", "changeTracking"}, s.search, false},
		{"/v1/pages", []string{"url", "job", "format", "changeTracking"}, s.page, false},
		{"/v1/pages/history", []string{"url"}, s.history, false},
		{"/v1/pages/diff", []string{"url", "from", "to"}, s.diff, false},
		{"/v1/jobs", []string{"kind", "since", "until", "limit", "cursor"}, s.jobs, false},
		{"/v1/jobs/:id", nil, s.job, false},
		{"/v1/jobs/:id/failures", []string{"reason", "limit", "cursor"}, s.failures, false},
		{"/v1/jobs/:id/cancelled", []string{"limit", "cursor"}, s.cancelled, false},
		{"/v1/jobs/:id/blocked", []string{"limit", "cursor"}, s.blocked, false},
		{"/v1/jobs/:id/export", []string{"format", "revisits", "changeTracking"}, s.export, true},
		{"/v1/changes", []string{"cursor", "limit", "changeTracking"}, s.changes, false},
	}
}

// Routes lists the API's paths (echo's syntax, /v1/jobs/:id) with the
// query parameters each takes: what the OpenAPI document must describe.
func (s *Server) Routes() map[string][]string {
	out := map[string][]string{}
	for _, r := range s.table() {
		out[r.path] = append([]string{}, r.params...)
	}
	return out
}

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.httpError
	for _, r := range s.table() {
		mw := []echo.MiddlewareFunc{s.observe(r.path, s.httpError), s.authenticate, admit(s.inflight, ErrBusy)}
		if r.export {
			// An export streams for as long as READER_EXPORT_MAX_TIME
			// lets ClickHouse write it: no deadline of a request.
			mw = append(mw, admit(s.exports, ErrExportsBusy))
		} else {
			mw = append(mw, deadline(s.cfg.RequestMaxTime))
		}
		e.GET(r.path, r.h, append(mw, onlyParams(r.params))...)
	}
	e.GET("/openapi.json", s.openAPI, s.observe("/openapi.json", s.httpError))
	// The web pages ask for the token themselves (a browser sends no
	// Authorization header on a link): internal/reader/web. What the
	// reader refuses before they are reached is answered as a page too.
	if s.pages != nil {
		base := s.pages.Base()
		for _, path := range []string{base, base + "/*"} {
			e.Any(path, echo.WrapHandler(s.pages), s.observe(base, s.pageError), admit(s.inflight, ErrBusy), deadline(s.cfg.RequestMaxTime))
		}
		// A person who types the reader's address lands on the pages.
		e.GET("/", func(c echo.Context) error {
			return c.Redirect(http.StatusSeeOther, base+"/")
		})
	}
	// The operational endpoints are every binary's (internal/ops).
	serveOps := echo.WrapHandler(s.ops)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		e.GET(path, serveOps)
	}
	return e
}

// authenticate lets a request through with one of the tokens.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.tokens == nil {
			return next(c)
		}
		h := c.Request().Header.Get("Authorization")
		if h == "" {
			return ErrUnauthorized
		}
		if err := s.tokens.Check(h); err != nil {
			return ErrUnauthorized
		}
		return next(c)
	}
}

// observe wraps a route in its span, its metrics and the headers every
// answer carries: nothing in an answer is for a browser to run. An error
// the route ends with is answered by fail (the API's JSON, or a page).
func (s *Server) observe(path string, fail func(error, echo.Context)) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
			h.Set("Cache-Control", "no-store")
			start := time.Now()
			// The job id of the path, when it is one (the path is the
			// client's: nothing else of it goes into the span).
			job := ""
			if id, err := uuid.Parse(c.Param("id")); err == nil {
				job = id.String()
			}
			ctx, span := tracing.Start(c.Request().Context(), s.tracer, "GET "+path, job)
			c.SetRequest(c.Request().WithContext(ctx))
			err := next(c)
			status := c.Response().Status
			if err != nil {
				// Written here, so that the metrics and the span see the
				// status the client gets.
				fail(err, c)
				status = c.Response().Status
			}
			s.metrics.requests.WithLabelValues(path, strconv.Itoa(status)).Inc()
			s.metrics.seconds.WithLabelValues(path).Observe(time.Since(start).Seconds())
			outcome := "ok"
			if status >= 400 {
				outcome = strconv.Itoa(status)
			}
			tracing.End(span, outcome, err, attribute.Int("http.response.status_code", status))
			s.log.Debug().Str("route", path).Int("status", status).Dur("took", time.Since(start)).Msg("request")
			return nil
		}
	}
}

// admit lets a request through while slots has room, holding a slot
// until it is answered; beyond it the request is refused with busy at
// once (no queue: a client told to retry later costs nothing, a queue of
// requests holds their connections and their memory).
func admit(slots chan struct{}, busy error) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				return next(c)
			default:
				return busy
			}
		}
	}
}

// onlyParams refuses a query parameter that is not in allowed, or given
// twice.
func onlyParams(allowed []string) echo.MiddlewareFunc {
	ok := map[string]bool{}
	for _, p := range allowed {
		ok[p] = true
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			for name, values := range c.QueryParams() {
				if !ok[name] {
					return &query.ParamError{Param: name, Reason: "not a parameter of this endpoint"}
				}
				if len(values) > 1 {
					return &query.ParamError{Param: name, Reason: "given more than once"}
				}
			}
			return next(c)
		}
	}
}

// deadline gives a request d to be answered, as a whole: every query it
// runs stops at the deadline, and a request that ends past it is answered
// with ErrDeadline (OutcomeOf). The request's own context is put back
// after, so that a deadline's end is not mistaken for the client leaving.
func deadline(d time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			ctx, cancel := context.WithTimeout(req.Context(), d)
			defer cancel()
			c.SetRequest(req.WithContext(ctx))
			err := next(c)
			c.SetRequest(req)
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w: %w", ErrDeadline, err)
			}
			return err
		}
	}
}
