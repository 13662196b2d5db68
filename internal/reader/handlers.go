package reader

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/changes/summary"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

func (s *Server) search(c echo.Context) error {
	q := query.SearchQuery{Text: c.QueryParam("q"), Job: c.QueryParam("job"), Kind: c.QueryParam("kind"), Host: c.QueryParam("host"),
		Change: c.QueryParam("change"), Order: c.QueryParam("order"), Cursor: c.QueryParam("cursor")}
	q.Count = q.Cursor == ""
	var err error
	if q.From, err = timeParam(c, "from"); err != nil {
		return err
	}
	if q.To, err = timeParam(c, "to"); err != nil {
		return err
	}
	if q.StatusMin, q.StatusMax, err = statusParam(c.QueryParam("status")); err != nil {
		return err
	}
	if q.Limit, err = intParam(c, "limit"); err != nil {
		return err
	}
	asked, gitDiff, err := trackingModes(c)
	if err != nil {
		return err
	}
	p, err := s.archive.Search(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := SearchAnswer{Hits: make([]Hit, 0, len(p.Hits)), Next: p.Next, Partial: p.Partial}
	if q.Count {
		n, rel := p.Counted()
		out.Count = &HitCount{Value: n, Relation: rel}
	}
	for _, h := range p.Hits {
		out.Hits = append(out.Hits, Hit{JobID: h.CrawlID.String(), JobKind: h.JobKind, URL: h.URL, Host: h.Host, Title: h.Title,
			StatusCode: h.StatusCode, Success: h.Success, ReceivedAt: h.ReceivedAt, Snippet: h.Snippet, Score: h.Score, Change: h.Change})
	}
	if asked {
		if err := s.hitsTracking(c.Request().Context(), out.Hits, gitDiff); err != nil {
			return err
		}
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, out)
}

// Formats of GET /v1/pages.
var pageFormats = []string{"json", "markdown", "html", "document"}

func (s *Server) page(c echo.Context) error {
	format := c.QueryParam("format")
	if format == "" {
		format = "json"
	}
	parts := query.PageParts{}
	switch format {
	case "json":
		parts.Markdown, parts.HTML = true, true
	case "markdown":
		parts.Markdown = true
	case "html":
		parts.HTML = true
	case "document":
		parts.Document = true
	default:
		return &query.ParamError{Param: "format", Reason: "must be one of " + strings.Join(pageFormats, ", ")}
	}
	asked, gitDiff, err := trackingModes(c)
	if err != nil {
		return err
	}
	if asked && format != "json" {
		return &query.ParamError{Param: "changeTracking", Reason: "only with format=json"}
	}
	p, err := s.archive.Page(c.Request().Context(), c.QueryParam("url"), c.QueryParam("job"), parts)
	var hidden *events.ChangeTracking
	if asked && errors.Is(err, query.ErrNoVersion) {
		p, hidden, err = s.latestState(c.Request().Context(), c.QueryParam("url"), c.QueryParam("job"), parts, err)
	}
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("X-Crawlhouse-Job", p.CrawlID.String())
	switch format {
	case "markdown":
		return c.Blob(http.StatusOK, "text/markdown; charset=utf-8", []byte(p.Markdown))
	case "html":
		// Crawled html, served so that no browser runs it: the sandbox
		// (no scripts, an opaque origin) set on every answer, and no
		// sniffing.
		return c.Blob(http.StatusOK, "text/html; charset=utf-8", []byte(p.HTML))
	case "document":
		return c.Blob(http.StatusOK, "application/json", p.Document)
	}
	html := p.HTML
	out := PageAnswer{JobID: p.CrawlID.String(), JobKind: p.JobKind, URL: p.URL, Title: p.Title,
		StatusCode: p.StatusCode, Success: p.Success, Origin: p.Origin, ReceivedAt: p.ReceivedAt, Error: p.Error, Markdown: p.Markdown, HTML: &html}
	switch {
	case hidden != nil:
		out.ChangeTracking = hidden
	case asked:
		if out.ChangeTracking, err = s.pageTracking(c.Request().Context(), p.URL, p.CrawlID, gitDiff); err != nil {
			return err
		}
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, out)
}

func (s *Server) history(c echo.Context) error {
	url := c.QueryParam("url")
	h, err := s.archive.History(c.Request().Context(), url)
	if err != nil {
		return err
	}
	out := HistoryAnswer{URL: url, Versions: make([]Version, 0, len(h))}
	for i, v := range h {
		e := Version{JobID: v.CrawlID.String(), JobKind: v.JobKind, Origin: v.Origin, StatusCode: v.StatusCode, ReceivedAt: v.ReceivedAt,
			JobStartedAt: v.JobStartedAt, Change: v.Change, ChangeTracking: historyTracking(h, i)}
		if v.PreviousCrawlID != nil {
			id := v.PreviousCrawlID.String()
			e.PreviousJobID = &id
		}
		out.Versions = append(out.Versions, e)
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, out)
}

// diff compares two versions of a page as `sink diff` does: the versions
// query.Reader.Versions picks, the unified diff of textdiff.
func (s *Server) diff(c echo.Context) error {
	url := c.QueryParam("url")
	if url == "" {
		return &query.ParamError{Param: "url", Reason: "must be given"}
	}
	from, to, err := s.archive.Versions(c.Request().Context(), url, c.QueryParam("from"), c.QueryParam("to"))
	if err != nil {
		return paramOfJob(err)
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, NewDiffAnswer(url, from, to))
}

// paramOfJob turns Versions' errors of a malformed job id ("from job id:
// …") into the parameter's error.
func paramOfJob(err error) error {
	msg := err.Error()
	for _, p := range []string{"from", "to"} {
		if strings.HasPrefix(msg, p+" job id:") {
			return &query.ParamError{Param: p, Reason: "not a job id (a UUID)"}
		}
	}
	return err
}

func (s *Server) jobs(c echo.Context) error {
	q := query.JobsQuery{Kind: c.QueryParam("kind"), Cursor: c.QueryParam("cursor")}
	var err error
	if q.Since, err = timeParam(c, "since"); err != nil {
		return err
	}
	if q.Until, err = timeParam(c, "until"); err != nil {
		return err
	}
	if q.Limit, err = intParam(c, "limit"); err != nil {
		return err
	}
	p, err := s.archive.Jobs(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := JobsAnswer{Jobs: make([]Job, 0, len(p.Jobs)), Next: p.Next}
	for _, j := range p.Jobs {
		out.Jobs = append(out.Jobs, jobOf(j))
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, out)
}

func (s *Server) job(c echo.Context) error {
	ctx := c.Request().Context()
	st, err := s.archive.JobStatus(ctx, c.Param("id"), 10)
	if err != nil {
		return err
	}
	out := NewJobAnswer(st)
	jc, err := s.archive.JobChanges(ctx, st.CrawlID.String(), query.ChangeQuery{MaxURLs: jobChangeURLs})
	switch {
	case errors.Is(err, query.ErrLimit) || errors.Is(err, query.ErrBusy):
		// The job's status stands without its summary: a job too large
		// for the read limits, or a busy archive, still has a status.
		out.ChangesOmitted = OutcomeOf(ctx, err).Code
	case err != nil:
		return err
	default:
		if out.Changes, err = summary.Encode(summary.Of(jc, nil, time.Now()), jobChangeBytes); err != nil {
			return err
		}
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, out)
}

// A job's change summary in GET /v1/jobs/{id} lists at most
// jobChangeURLs changed and removed URLs, in at most jobChangeBytes (the
// counts are always exact; the Omitted counts say what the lists leave
// out), as the summary published on crawl.changes.
const (
	jobChangeURLs  = 1000
	jobChangeBytes = 1 << 20
)

func (s *Server) failures(c echo.Context) error {
	return s.failuresOf(c, c.QueryParam("reason"))
}

func (s *Server) cancelled(c echo.Context) error {
	return s.failuresOf(c, "cancelled")
}

func (s *Server) failuresOf(c echo.Context, reason string) error {
	limit, err := intParam(c, "limit")
	if err != nil {
		return err
	}
	p, err := s.archive.Failures(c.Request().Context(), query.FailuresQuery{Job: c.Param("id"), Reason: reason, Limit: limit, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	out := FailuresAnswer{Failures: make([]Failure, 0, len(p.Failures)), Next: p.Next}
	for _, f := range p.Failures {
		out.Failures = append(out.Failures, Failure{URL: f.URL, StatusCode: f.StatusCode, Error: f.Error, Reason: f.Reason, ReceivedAt: f.ReceivedAt})
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, out)
}

func (s *Server) blocked(c echo.Context) error {
	limit, err := intParam(c, "limit")
	if err != nil {
		return err
	}
	p, err := s.archive.Blocked(c.Request().Context(), query.BlockedQuery{Job: c.Param("id"), Limit: limit, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	if p.URLs == nil {
		p.URLs = []string{}
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, BlockedAnswer{URLs: p.URLs, Next: p.Next})
}

func (s *Server) changes(c echo.Context) error {
	limit, err := intParam(c, "limit")
	if err != nil {
		return err
	}
	tracked, gitDiff, err := trackingModes(c)
	if err != nil {
		return err
	}
	p, err := s.archive.Changes(c.Request().Context(), query.FeedQuery{Cursor: c.QueryParam("cursor"), Limit: limit})
	if err != nil {
		return err
	}
	out := ChangesAnswer{Changes: make([]Change, 0, len(p.Items)), Next: p.Next}
	for _, it := range p.Items {
		out.Changes = append(out.Changes, Change{ID: it.ID, Kind: it.Kind, JobID: it.CrawlID.String(), JobKind: it.JobKind, URL: it.URL,
			StatusCode: it.StatusCode, Title: it.Title, Error: it.Error, Reason: it.Reason, Change: it.Change, ReceivedAt: it.ReceivedAt, InsertedAt: it.InsertedAt})
	}
	if tracked {
		if err := s.feedTracking(c.Request().Context(), p.Items, out.Changes, gitDiff); err != nil {
			return err
		}
	}
	return ops.WriteJSON(c.Response(), http.StatusOK, out)
}

// The export is streamed: its status and headers go with its first byte,
// so an unknown job is still answered 404 as JSON. An error after the
// first byte breaks the connection (http.ErrAbortHandler) so that the
// client sees a cut transfer, never a file that looks whole.
func (s *Server) export(c echo.Context) error {
	format := c.QueryParam("format")
	if format == "" {
		format = "ndjson"
	}
	var write func(ctx context.Context, job string, w io.Writer) (int64, error)
	contentType, filename := "", format
	switch format {
	case "ndjson":
		opts, err := exportTracking(c)
		if err != nil {
			return err
		}
		write = func(ctx context.Context, job string, w io.Writer) (int64, error) {
			return s.archive.ExportNDJSON(ctx, job, opts, w)
		}
		contentType = "application/x-ndjson"
	case "parquet":
		write, contentType = s.archive.ExportParquet, "application/vnd.apache.parquet"
	case "warc", "cdxj":
		opts, err := warcOptions(c.QueryParam("revisits"))
		if err != nil {
			return err
		}
		export := s.archive.ExportWARC
		contentType, filename = "application/warc", "warc.gz"
		if format == "cdxj" {
			export, contentType, filename = s.archive.ExportCDXJ, "application/cdxj", "cdxj"
		}
		write = func(ctx context.Context, job string, w io.Writer) (int64, error) { return export(ctx, job, opts, w) }
	case "wacz":
		write, contentType = s.archive.ExportWACZ, "application/wacz"
	default:
		return &query.ParamError{Param: "format", Reason: "must be ndjson, parquet, warc, cdxj or wacz"}
	}
	if format != "ndjson" && c.QueryParams().Has("changeTracking") {
		return &query.ParamError{Param: "changeTracking", Reason: "only with format=ndjson"}
	}
	return s.stream(c, format, filename, contentType, write)
}

// stream runs write into the answer, encoded as the request accepts.
func (s *Server) stream(c echo.Context, format, filename, contentType string, write func(ctx context.Context, job string, w io.Writer) (int64, error)) error {
	job := c.Param("id")
	encoding := exportEncoding(c.Request().Header.Get("Accept-Encoding"))
	lw := &lazyWriter{c: c, start: func(h http.Header) {
		h.Set("Content-Type", contentType)
		h.Set("Content-Disposition", `attachment; filename="job-`+fileStem(job)+`.`+filename+`"`)
		setEncoding(h, encoding)
	}}
	enc, err := encoder(encoding, lw)
	if err != nil {
		return err
	}
	n, err := write(c.Request().Context(), job, enc)
	s.metrics.exportBytes.WithLabelValues(format).Add(float64(n))
	if err == nil {
		err = enc.Close()
	} else {
		release(enc)
	}
	if err != nil && lw.started {
		s.log.Error().Err(err).Str("job", safeName(job)).Str("format", format).Int64("bytes", n).Msg("export cut")
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		return err
	}
	if !lw.started {
		lw.begin()
	}
	return nil
}

// warcOptions reads the revisits parameter of a WARC export: none (the
// default, a file every page replays from) or previous (revisit records
// into the previous job's export for unchanged pages).
func warcOptions(revisits string) (query.WARCOptions, error) {
	switch revisits {
	case "", "none":
		return query.WARCOptions{}, nil
	case "previous":
		return query.WARCOptions{Revisits: true}, nil
	}
	return query.WARCOptions{}, &query.ParamError{Param: "revisits", Reason: "must be none or previous"}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9-]`)

func safeName(s string) string { return unsafeName.ReplaceAllString(s, "_") }

// fileStem names a job's export files: its id in canonical form (as the
// CDXJ index names the WARC, query.WARCFileName), whatever form of UUID the
// path spelt it in.
func fileStem(job string) string {
	if id, err := uuid.Parse(job); err == nil {
		return id.String()
	}
	return safeName(job)
}

// lazyWriter sends the status and headers with the first byte.
type lazyWriter struct {
	c       echo.Context
	start   func(http.Header)
	started bool
}

func (w *lazyWriter) begin() {
	w.started = true
	w.start(w.c.Response().Header())
	w.c.Response().WriteHeader(http.StatusOK)
}

func (w *lazyWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.begin()
	}
	return w.c.Response().Write(p)
}

// timeParam reads an RFC 3339 time; zero when absent.
func timeParam(c echo.Context, name string) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || t.Year() < 1970 || t.Year() > 2200 {
		return time.Time{}, &query.ParamError{Param: name, Reason: "not an RFC 3339 time between 1970 and 2200 (e.g. 2026-11-27T10:00:00Z)"}
	}
	return t, nil
}

// intParam reads a count; 0 when absent.
func intParam(c echo.Context, name string) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 1<<20 {
		return 0, &query.ParamError{Param: name, Reason: "not a positive whole number"}
	}
	return n, nil
}

// statusParam reads status: a code (404), a class (4xx) or a range
// (400-499).
func statusParam(v string) (lo, hi uint16, err error) {
	if v == "" {
		return 0, 0, nil
	}
	bad := &query.ParamError{Param: "status", Reason: "not a status code (404), a class (4xx) or a range (400-499) of codes 100 to 599"}
	code := func(s string) (uint16, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return 0, bad
		}
		return uint16(n), nil
	}
	switch {
	case len(v) == 3 && strings.HasSuffix(strings.ToLower(v), "xx"):
		c, err := code(v[:1] + "00")
		return c, c + 99, err
	case strings.Contains(v, "-"):
		a, b, _ := strings.Cut(v, "-")
		if lo, err = code(a); err != nil {
			return 0, 0, err
		}
		if hi, err = code(b); err != nil {
			return 0, 0, err
		}
		if lo > hi {
			return 0, 0, bad
		}
		return lo, hi, nil
	}
	c, err := code(v)
	return c, c, err
}
