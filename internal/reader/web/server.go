package web

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/reader"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// ContentSecurityPolicy is sent with every response of the pages. No script
// runs at all (the pages need none); styles and images come only from the
// pages' own origin, so neither a sanitised page nor the html of a page in
// its sandboxed iframe (which inherits this policy) reaches any other host;
// no plugin, no <base> rewriting, forms only to the pages themselves, and no
// other site may frame the pages. The pages add a report-uri (cspreport.go).
const ContentSecurityPolicy = "default-src 'self'; script-src 'none'; object-src 'none'; " +
	"style-src 'self'; img-src 'self'; font-src 'self'; connect-src 'none'; frame-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// DefaultBase is the path the read API serves the pages under.
const DefaultBase = "/ui"

// Options configure the pages.
type Options struct {
	// Base is the path the pages are served under, e.g. "/ui" (no trailing
	// slash). Every link the pages write starts with it.
	Base string
	// Logger receives internal errors, logged once, where they are turned
	// into a page.
	Logger zerolog.Logger
	// Tokens, when set, checks the token every page asks for (auth.go);
	// nil: open access.
	Tokens TokenChecker
	// Now is the clock of the bound on logged reports (time.Now when
	// nil; tests stop it).
	Now func() time.Time
}

// Server serves the pages over the reader's Archive, the one the read
// API's JSON answers come from: the pages add no query of their own, so
// every limit of the read API holds for them. It is an http.Handler for
// the paths under Options.Base, safe for concurrent use.
type Server struct {
	archive reader.Archive
	base    string
	log     zerolog.Logger
	// reports bounds the violation reports logged: anyone who reaches
	// the port may post them.
	reports *logs.Bounded
	tokens  TokenChecker
	// sameOrigin refuses a sign-in posted from another site.
	sameOrigin *http.CrossOriginProtection
	render     *renderer
	pages      map[string]*template.Template
	mux        *http.ServeMux
}

var _ reader.Pages = (*Server)(nil)

// New returns the pages over archive.
func New(archive reader.Archive, opts Options) (*Server, error) {
	if archive == nil {
		return nil, errors.New("web: nil archive")
	}
	base := strings.TrimSuffix(opts.Base, "/")
	if base != "" && !strings.HasPrefix(base, "/") {
		return nil, errors.New("web: base path must start with /")
	}
	s := &Server{archive: archive, base: base, log: opts.Logger, tokens: opts.Tokens, render: newRenderer(), sameOrigin: http.NewCrossOriginProtection(),
		reports: logs.NewBounded(ReportBurst, ReportRate, orNow(opts.Now))}
	var err error
	if s.pages, err = s.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	pages := http.NewServeMux()
	pages.HandleFunc("GET "+base+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+"/jobs", http.StatusSeeOther)
	})
	pages.Handle("GET "+base+"/jobs", s.handle(s.jobs))
	pages.Handle("GET "+base+"/jobs/{id}", s.handle(s.job))
	pages.Handle("GET "+base+"/failures", s.handle(s.failures))
	pages.Handle("GET "+base+"/search", s.handle(s.search))
	pages.Handle("GET "+base+"/page", s.handle(s.page))
	pages.Handle("GET "+base+"/diff", s.handle(s.diff))
	pages.Handle(base+"/", s.handle(func(*http.Request) (string, any, error) { return "", nil, reader.ErrNoRoute }))
	s.mux = http.NewServeMux()
	s.mux.Handle(base+"/", s.requireToken(pages))
	s.mux.HandleFunc("GET "+base+"/login", s.login)
	s.mux.HandleFunc("POST "+base+"/login", s.login)
	s.mux.Handle("GET "+base+"/static/", http.StripPrefix(base+"/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("POST "+base+cspReportPath, s.cspViolation)
	return s, nil
}

// Base is the path the pages are served under.
func (s *Server) Base() string { return s.base }

// ServeHTTP serves one request, with the security headers on every answer
// (pages, errors, the stylesheet).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.secure(w.Header())
	s.mux.ServeHTTP(w, r)
}

// secure sets the headers that keep crawled content inert.
func (s *Server) secure(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy+"; report-uri "+s.base+cspReportPath)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	// The markdown's links are to crawled hosts: no DNS query for them
	// until the reader follows one.
	h.Set("X-DNS-Prefetch-Control", "off")
}

// pageFunc reads what one page shows: the template's name and its data.
type pageFunc func(r *http.Request) (name string, data any, err error)

// handle runs f and writes its page, or the error page when f fails. The
// page is rendered into a buffer first, so a template error never leaves
// half a page behind a 200.
func (s *Server) handle(f pageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, data, err := f(r)
		var shown *shownError
		if errors.As(err, &shown) {
			o := reader.OutcomeOf(r.Context(), shown.err)
			s.write(w, r, o.Status, shown.name, shown.data)
			return
		}
		if err != nil {
			s.Fail(w, r, err)
			return
		}
		s.write(w, r, http.StatusOK, name, data)
	})
}

// shownError is an error a page answers with itself, showing it (a search
// form with the reason its query was refused), under the status the error
// table gives err.
type shownError struct {
	name string
	data any
	err  error
}

func (e *shownError) Error() string { return e.err.Error() }
func (e *shownError) Unwrap() error { return e.err }

// write renders template name with data and writes it with status; a
// template that fails is an internal error.
func (s *Server) write(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout", s.view(r, data)); err != nil {
		if name == "error" {
			s.log.Error().Err(err).Msg("web error page failed")
			http.Error(w, http.StatusText(status), status)
			return
		}
		s.Fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// Fail writes the error page of a request that ended with err: the status,
// Retry-After and message of reader.OutcomeOf, the same as the read API's
// JSON answers for the same condition, with the error logged (once, here)
// where the table says so.
func (s *Server) Fail(w http.ResponseWriter, r *http.Request, err error) {
	o := reader.OutcomeOf(r.Context(), err)
	o.LogTo(s.log, err, r.URL.Path)
	o.Headers(w.Header())
	// The security headers of every page, on an answer the reader wrote
	// before the pages were reached too.
	s.secure(w.Header())
	s.write(w, r, o.Status, "error", errorPage{Status: o.Status, Message: o.Message})
}

// errorPage is the data of the error template.
type errorPage struct {
	Status  int
	Message string
}

// view is what every template gets: the page's own data and the base path.
type view struct {
	Base string
	// Path is the request path without Base, to mark the current tab.
	Path string
	Data any
	// Referrer is the page's referrer policy (the header's, repeated in
	// a meta element).
	Referrer string
	// query is the request's query, for With.
	query url.Values
}

func (s *Server) view(r *http.Request, data any) view {
	referrer := "no-referrer"
	if _, ok := data.(loginPage); ok {
		referrer = loginReferrerPolicy
	}
	return view{Base: s.base, Path: strings.TrimPrefix(r.URL.Path, s.base), Data: data, Referrer: referrer, query: r.URL.Query()}
}

// orNow is now, or time.Now when it is nil.
func orNow(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
