package crawlsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
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
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// API serves GET /v2/crawl/{id} for the crawls added to it. It implements
// http.Handler; Start runs it on a loopback listener.
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

// ServeHTTP answers GET /v2/crawl/{id}?skip=N[&limit=M].
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests++
	n := a.requests
	a.mu.Unlock()

	id, ok := strings.CutPrefix(r.URL.Path, "/v2/crawl/")
	if !ok || id == "" || strings.Contains(id, "/") {
		writeError(w, http.StatusNotFound, "Not found")
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
	c := a.crawls[id]
	a.mu.Unlock()
	if c == nil {
		writeError(w, http.StatusNotFound, "Job not found")
		return
	}
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
		secs := max(1, int((a.o.RetryAfter+time.Second-1)/time.Second))
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"Rate limit exceeded. Consumed (req/min): 101, Remaining (req/min): 0. Upgrade your plan for increased rate limits or please retry after %ds, resets at %s",
			secs, now.Add(time.Duration(secs)*time.Second).UTC().Format(time.RFC1123)))
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
	resp := statusResponse{Success: true, Status: c.status, ExpiresAt: c.expiresAt.UTC().Format("2006-01-02T15:04:05.000Z")}
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
	if c.status != StatusCompleted || end < c.scraped {
		base := a.o.NextBase
		if base == "" {
			base = "http://" + r.Host
		}
		q := "?skip=" + strconv.Itoa(max(end, skip))
		if r.URL.Query().Get("limit") != "" {
			q += "&limit=" + strconv.Itoa(limit)
		}
		resp.Next = strings.TrimSuffix(base, "/") + "/v2/crawl/" + c.ID + q
	}
	c.mu.Unlock()

	head, _ := marshal(resp)
	var b bytes.Buffer
	b.Grow(len(head) + size + len(docs) + 16)
	b.Write(head[:len(head)-1])
	b.WriteString(`,"data":[`)
	for i, d := range docs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(d)
	}
	b.WriteString("]}")
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(b.Bytes())
}
