package crawlsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// APIOptions configure the status endpoint.
type APIOptions struct {
	// Key is the API key expected in "Authorization: Bearer <key>". Empty
	// accepts any request (development only).
	Key string
	// PageDocs is the most entries a page covers (default 100, the API's).
	PageDocs int
	// PageBytes cuts a page once its documents reach this size (default
	// 10 MB, the API's). A page always holds at least one document.
	PageBytes int
	// NotFoundReads answers 404 to the first N reads of each crawl, as the
	// API may right after a crawl is created.
	NotFoundReads int
	// ThrottleReads answers 429 to the first N reads of each crawl (after
	// any 404s); ThrottleEvery answers 429 to every Nth request overall.
	// Neither sets Retry-After: the wait is in the error text, "retry after
	// Ns" with N = RetryAfter in whole seconds (at least 1).
	ThrottleReads int
	ThrottleEvery int
	RetryAfter    time.Duration
	// NextBase replaces the scheme and host of next links (default: the
	// request's host over http). Self-hosted APIs are known to put a wrong
	// scheme or host here; clients must use only the path and query.
	NextBase string
	// NoErrorsEndpoint makes the API one without GET .../{id}/errors: the
	// route is unknown and answers 404 as the API's web framework does, an
	// HTML "Cannot GET" page.
	NoErrorsEndpoint bool
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// API serves the status and errors endpoints of the jobs added to it:
//
//	GET /v2/crawl/{id}                 Job status of a crawl
//	GET /v2/batch/scrape/{id}          Job status of a batch scrape
//	GET /v2/crawl/{id}/errors          its failed scrapes and robots-blocked URLs
//	GET /v2/batch/scrape/{id}/errors
//
// A job is served only under its kind's path: a batch scrape's id under
// /v2/crawl/ is "Job not found", so a client that picks the wrong path
// finds out. (The real API happens to answer a batch scrape's id under
// /v2/crawl/ too; nothing should rely on that.) It implements http.Handler.
type API struct {
	o        APIOptions
	mu       sync.Mutex
	crawls   map[string]*Crawl
	requests int
}

// NewAPI returns an API with no crawls.
func NewAPI(o APIOptions) *API {
	if o.PageDocs <= 0 {
		o.PageDocs = 100
	}
	if o.PageBytes <= 0 {
		o.PageBytes = 10 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &API{o: o, crawls: make(map[string]*Crawl)}
}

// Add makes a crawl readable.
func (a *API) Add(c *Crawl) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.crawls[c.ID] = c
}

// Requests is the number of requests served, whatever their answer.
func (a *API) Requests() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests
}

// statusResponse is a Job status in the API's key order; data is written
// separately from the documents' stored bytes.
type statusResponse struct {
	Success     bool   `json:"success"`
	Status      string `json:"status"`
	Completed   int    `json:"completed"`
	Total       int    `json:"total"`
	CreditsUsed int    `json:"creditsUsed"`
	ExpiresAt   string `json:"expiresAt"`
	Next        string `json:"next,omitempty"`
}

// robotsWarning is the status's warning once a job that had robots-blocked
// URLs is no longer scraping, the real API's text.
const robotsWarning = "One or more pages were unable to be crawled because the robots.txt file prevented this. Please use the /scrape endpoint instead."

// errorsResponse is the errors endpoint's answer, in the API's key order;
// it has no success field.
type errorsResponse struct {
	Errors        []errorEntry `json:"errors"`
	RobotsBlocked []string     `json:"robotsBlocked"`
}

// errorEntry is one failed scrape: the scrape job's id, when it failed, its
// URL, the error's code when the error has one, and its message.
type errorEntry struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp,omitempty"`
	URL       string `json:"url"`
	Code      string `json:"code,omitempty"`
	Error     string `json:"error"`
}

type errorResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	b, _ := marshal(errorResponse{Error: msg})
	w.Write(b)
}

// route is what a request path names: a job's status or its errors.
type route struct {
	kind   string
	id     string
	errors bool
}

func parseRoute(path string) (route, bool) {
	var r route
	rest, ok := strings.CutPrefix(path, crawlapi.JobPath(events.KindCrawl))
	r.kind = events.KindCrawl
	if !ok {
		if rest, ok = strings.CutPrefix(path, crawlapi.JobPath(events.KindBatchScrape)); !ok {
			return r, false
		}
		r.kind = events.KindBatchScrape
	}
	if id, ok := strings.CutSuffix(rest, crawlapi.ErrorsPath); ok {
		rest, r.errors = id, true
	}
	if rest == "" || strings.Contains(rest, "/") {
		return r, false
	}
	r.id = rest
	return r, true
}

// ServeHTTP answers GET /v2/crawl/{id}?skip=N[&limit=M], its batch scrape
// twin, and their /errors.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests++
	n := a.requests
	a.mu.Unlock()

	rt, ok := parseRoute(r.URL.Path)
	if !ok || (rt.errors && a.o.NoErrorsEndpoint) {
		// An unknown route, answered as the API's web framework does.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>Cannot %s %s</pre>\n</body>\n</html>\n",
			html.EscapeString(r.Method), html.EscapeString(r.URL.Path))
		return
	}
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "Method not allowed")
		return
	}
	if a.o.Key != "" && r.Header.Get("Authorization") != "Bearer "+a.o.Key {
		writeError(w, http.StatusUnauthorized, "Unauthorized: Invalid token")
		return
	}
	a.mu.Lock()
	c := a.crawls[rt.id]
	a.mu.Unlock()
	if c == nil || c.Kind != rt.kind {
		writeError(w, http.StatusNotFound, "Job not found")
		return
	}
	if rt.errors {
		a.serveErrors(w, c, n)
		return
	}
	a.serveStatus(w, r, c, n)
}

// throttled answers 429 as the API does: no Retry-After, the wait in the
// error text.
func (a *API) throttled(w http.ResponseWriter, now time.Time) {
	secs := max(1, int((a.o.RetryAfter+time.Second-1)/time.Second))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
		"Rate limit exceeded. Consumed (req/min): 101, Remaining (req/min): 0. Upgrade your plan for increased rate limits or please retry after %ds, resets at %s",
		secs, now.Add(time.Duration(secs)*time.Second).UTC().Format(time.RFC1123)))
}

// serveErrors lists the job's failed scrapes so far (whether or not their
// deliveries got through: the API knows its failures, not its webhooks'
// fate) and its robots-blocked URLs. n is the request's number, for
// ThrottleEvery.
func (a *API) serveErrors(w http.ResponseWriter, c *Crawl, n int) {
	now := a.o.Now()
	c.mu.Lock()
	c.errorReads++
	if c.expired || (!c.expiresAt.IsZero() && now.After(c.expiresAt)) {
		c.mu.Unlock()
		writeError(w, http.StatusNotFound, "Job not found")
		return
	}
	if a.o.ThrottleEvery > 0 && n%a.o.ThrottleEvery == 0 {
		c.mu.Unlock()
		a.throttled(w, now)
		return
	}
	resp := errorsResponse{Errors: []errorEntry{}, RobotsBlocked: slices.Clone(c.RobotsBlocked)}
	if resp.RobotsBlocked == nil {
		resp.RobotsBlocked = []string{}
	}
	for i, p := range c.Pages[:c.scraped] {
		if p.Success {
			continue
		}
		resp.Errors = append(resp.Errors, errorEntry{ID: p.jobID, Timestamp: isoTime(c.scrapedAt[i]),
			URL: p.URL, Code: p.Code, Error: p.Error})
	}
	c.mu.Unlock()
	b, _ := marshal(resp)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(b)
}

// isoTime formats t as JavaScript's toISOString does.
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// serveStatus answers a Job status page. n is the request's number, for
// ThrottleEvery.
func (a *API) serveStatus(w http.ResponseWriter, r *http.Request, c *Crawl, n int) {
	now := a.o.Now()

	c.mu.Lock()
	c.reads++
	reads := c.reads
	if c.expired || (!c.expiresAt.IsZero() && now.After(c.expiresAt)) || reads <= a.o.NotFoundReads {
		c.mu.Unlock()
		writeError(w, http.StatusNotFound, "Job not found")
		return
	}
	if reads <= a.o.NotFoundReads+a.o.ThrottleReads || (a.o.ThrottleEvery > 0 && n%a.o.ThrottleEvery == 0) {
		c.mu.Unlock()
		a.throttled(w, now)
		return
	}

	skip := 0
	if s := r.URL.Query().Get("skip"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			c.mu.Unlock()
			writeError(w, http.StatusBadRequest, "Invalid skip")
			return
		}
		skip = v
	}
	limit := a.o.PageDocs
	if s := r.URL.Query().Get("limit"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			limit = min(v, limit)
		}
	}

	// The cursor (skip) counts scraped entries, failed ones included, as the
	// API's does; data holds only the successful ones.
	c.expiresAt = now.Add(24 * time.Hour)
	resp := statusResponse{Success: true, Status: c.status, ExpiresAt: isoTime(c.expiresAt)}
	for _, p := range c.Pages[:c.scraped] {
		if p.Success {
			resp.Completed++
			resp.CreditsUsed++
		}
	}
	resp.Total = c.scraped
	var docs []json.RawMessage
	end, size := skip, 0
	for end < c.scraped && end-skip < limit {
		p := c.Pages[end]
		if p.doc != nil {
			if len(docs) > 0 && size+len(p.doc) > a.o.PageBytes {
				break
			}
			docs = append(docs, p.doc)
			size += len(p.doc)
		}
		end++
	}
	// As the real API: next stays present until the job is completed and
	// read to its end, so a cancelled or failed job always has one.
	if c.status != crawlapi.StatusCompleted || end < c.scraped {
		base := a.o.NextBase
		if base == "" {
			base = "http://" + r.Host
		}
		q := "?skip=" + strconv.Itoa(max(end, skip))
		if r.URL.Query().Get("limit") != "" {
			q += "&limit=" + strconv.Itoa(limit)
		}
		resp.Next = strings.TrimSuffix(base, "/") + c.StatusPath() + q
	}
	warning := ""
	if len(c.RobotsBlocked) > 0 && c.status != crawlapi.StatusScraping {
		warning = robotsWarning
	}
	c.mu.Unlock()

	head, _ := marshal(resp)
	var b bytes.Buffer
	b.Grow(len(head) + size + len(docs) + len(warning) + 32)
	b.Write(head[:len(head)-1])
	b.WriteString(`,"data":[`)
	for i, d := range docs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(d)
	}
	b.WriteByte(']')
	if warning != "" {
		wb, _ := marshal(warning)
		b.WriteString(`,"warning":`)
		b.Write(wb)
	}
	b.WriteByte('}')
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(b.Bytes())
}
