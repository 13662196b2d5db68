package crawlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/rs/zerolog"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// BaseURL is CRAWL_API_URL, e.g. https://api.example.com. The key is only
	// ever sent to its scheme, host and port.
	BaseURL string
	// Key is CRAWL_API_KEY, sent as "Authorization: Bearer <key>". It never
	// appears in logs or errors.
	Key string
	// HTTP is the client for requests (default: 60 s timeout).
	HTTP *http.Client
	// Attempts bounds the tries of one request on 429, 5xx and network
	// errors (default 8).
	Attempts int
	// MinBackoff and MaxBackoff bound the exponential backoff, and
	// MaxBackoff also caps a wait the server asks for (defaults 1 s, 2 min).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// NotFoundRetries is how many times a 404 is retried before the crawl
	// is taken as expired (default 3), NotFoundWait the first wait, doubled
	// each time (default 5 s): the API may answer 404 right after a crawl
	// is created.
	NotFoundRetries int
	NotFoundWait    time.Duration
	// MaxBodyBytes bounds a response (default 64 MB; a chunk is at most
	// 10 MB of documents).
	MaxBodyBytes int64
}

// Client reads crawl status pages from the crawl API. It is safe for
// concurrent use.
type Client struct {
	cfg  ClientConfig
	base *url.URL
	log  zerolog.Logger
	// now and sleep are the clock; tests replace them to see the waits
	// without spending them.
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

// NewClient checks the configuration and returns a Client.
func NewClient(cfg ClientConfig, log zerolog.Logger) (*Client, error) {
	base, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("backfill: CRAWL_API_URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("backfill: CRAWL_API_URL must be scheme://host[:port][/path] only")
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 60 * time.Second}
	}
	// The key is set per request on our own host only; a redirect elsewhere
	// would carry it (Go keeps Authorization on same-domain redirects only,
	// but a redirect is never what the status endpoint means), so none is
	// followed.
	hc := *cfg.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.HTTP = &hc
	if cfg.Attempts <= 0 {
		cfg.Attempts = 8
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 2 * time.Minute
	}
	if cfg.NotFoundRetries < 0 {
		cfg.NotFoundRetries = 0
	} else if cfg.NotFoundRetries == 0 {
		cfg.NotFoundRetries = 3
	}
	if cfg.NotFoundWait <= 0 {
		cfg.NotFoundWait = 5 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	return &Client{cfg: cfg, base: base, log: log, now: time.Now, sleep: backoff.Sleep}, nil
}

// StatusPage is one chunk of a crawl's status.
type StatusPage struct {
	// Status is scraping, completed, cancelled or failed.
	Status string
	// Total is the number of pages attempted, Completed those that
	// succeeded; both are clamped to [0, maxCount].
	Total     int
	Completed int
	// CreditsUsed is -1 when unknown (self-hosted APIs send -1).
	CreditsUsed int
	ExpiresAt   time.Time
	// Next is the next link as the API sent it, "" when absent or null.
	Next string
	// Data holds the successful pages of this chunk, raw JSON kept.
	Data []events.Document
}

type statusBody struct {
	Success     bool              `json:"success"`
	Status      string            `json:"status"`
	Total       json.RawMessage   `json:"total"`
	Completed   json.RawMessage   `json:"completed"`
	CreditsUsed json.RawMessage   `json:"creditsUsed"`
	ExpiresAt   time.Time         `json:"expiresAt"`
	Next        *string           `json:"next"`
	Data        []events.Document `json:"data"`
	Error       string            `json:"error"`
}

// maxCount bounds the counts read from the API: far above any real crawl,
// far below overflow wherever they are added or compared.
const maxCount = 1 << 40

// apiNumber reads the number field name of a status (raw JSON: any number,
// or null or absent for 0) clamped to [lo, maxCount]: a float or an
// exponent does not fail the page, and a negative or huge value cannot turn
// the paging arithmetic around.
func apiNumber(name string, raw json.RawMessage, lo int) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return max(0, lo), nil
	}
	var num json.Number
	if err := json.Unmarshal(raw, &num); err != nil {
		return 0, fmt.Errorf("%s is not a number: %.40s", name, raw)
	}
	// A number beyond float64 is ±Inf with ErrRange: clamped below.
	f, err := strconv.ParseFloat(num.String(), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is not a number: %.40s", name, raw)
	}
	return int(min(max(f, float64(lo)), maxCount)), nil
}

// FirstRef is the reference of a crawl's first status page.
func FirstRef(crawlID string) string { return "/v2/crawl/" + url.PathEscape(crawlID) }

// A reference (FirstRef, a Ref, a saved cursor) is the path and query of a
// status page on CRAWL_API_URL's host: a request URI such as
// "/v2/crawl/{id}?skip=10", never a URL of its own. Only target turns one
// into a URL, always on the base's scheme, host and port, so whatever a
// reference holds, the key goes nowhere else.

// Ref resolves next, the next link of the page read at current (a
// reference), and returns the reference to follow. next is resolved as a
// browser would (RFC 3986) against the URL of the page that carried it, so
// that a relative link ("v2/crawl/…", "@host/…", "//host/…") means what it
// says, and the result must name CRAWL_API_URL's host (compared without
// regard to case) and its effective port, or no port; its scheme is ignored,
// because self-hosted APIs are known to put a wrong one there, and the
// request goes on the base's scheme anyway. Anything else (another host or
// port, userinfo, an opaque URL, a path beginning with //) is refused with
// ErrForeignNext and a log line naming the link, redacted.
func (c *Client) Ref(current, next string) (string, error) {
	from, err := c.target(current)
	if err != nil {
		from = c.base
	}
	n, err := url.Parse(strings.TrimSpace(next))
	if err != nil {
		return "", c.refuse(next, "not a URL")
	}
	u := from.ResolveReference(n)
	switch {
	case u.Opaque != "":
		return "", c.refuse(next, "opaque URL")
	case u.User != nil:
		return "", c.refuse(u.String(), "userinfo in the link")
	case !strings.EqualFold(u.Hostname(), c.base.Hostname()):
		return "", c.refuse(u.String(), "another host")
	case u.Port() != "" && u.Port() != effectivePort(c.base):
		return "", c.refuse(u.String(), "another port")
	case strings.HasPrefix(u.EscapedPath(), "//"):
		// A reference beginning with // would read as a host when the
		// cursor is parsed again; the API never sends one.
		return "", c.refuse(u.String(), "path begins with //")
	}
	return requestURI(u), nil
}

func (c *Client) refuse(next, why string) error {
	redacted := logs.RedactURL(next)
	c.log.Warn().Str("next", redacted).Str("reason", why).Str("api", logs.RedactURL(c.base.String())).
		Msg("crawl API sent a next link off CRAWL_API_URL's host; not followed, the key is not sent")
	return fmt.Errorf("%w: %s (%s)", ErrForeignNext, redacted, why)
}

// requestURI is the path and query of u, the form of a reference.
func requestURI(u *url.URL) string {
	r := url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}
	if r.Path == "" {
		r.Path = "/"
	}
	return r.String()
}

func defaultPort(scheme string) string {
	if strings.EqualFold(scheme, "https") {
		return "443"
	}
	return "80"
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return defaultPort(u.Scheme)
}

// target is the URL of a reference: the base's scheme and host, the
// reference's path and query. A reference that does not already carry the
// base's path prefix (FirstRef) gets it. A reference with a scheme, a host
// or userinfo, or a relative path, is refused: a saved cursor is input too.
func (c *Client) target(ref string) (*url.URL, error) {
	r, err := url.Parse(ref)
	if err != nil {
		// url.Error would repeat the reference unredacted.
		return nil, fmt.Errorf("reference %s does not parse", logs.RedactURL(ref))
	}
	if r.Scheme != "" || r.Host != "" || r.User != nil || r.Opaque != "" || !strings.HasPrefix(r.Path, "/") {
		return nil, fmt.Errorf("reference %s is not a path on CRAWL_API_URL's host", logs.RedactURL(ref))
	}
	t := &url.URL{Scheme: c.base.Scheme, Host: c.base.Host, Path: r.Path, RawPath: r.RawPath, RawQuery: r.RawQuery}
	if c.base.Path != "" && t.Path != c.base.Path && !strings.HasPrefix(t.Path, c.base.Path+"/") {
		t.Path = c.base.Path + r.Path
		t.RawPath = ""
		if r.RawPath != "" {
			t.RawPath = c.base.EscapedPath() + r.RawPath
		}
	}
	return t, nil
}

// Get reads the status page at ref (FirstRef, JobRef or a Ref), retrying
// as the package documentation says. It returns ErrUnauthorized,
// ErrNotFound, ErrUnavailable (wrapped) or another error for a
// non-retryable answer.
func (c *Client) Get(ctx context.Context, crawlID, ref string) (*StatusPage, error) {
	body, err := c.fetch(ctx, "status", crawlID, ref, c.cfg.NotFoundRetries)
	if err != nil {
		return nil, err
	}
	var sb statusBody
	if err := json.Unmarshal(body, &sb); err != nil {
		return nil, fmt.Errorf("status of crawl %s: decode: %w", crawlID, err)
	}
	p := &StatusPage{Status: sb.Status, ExpiresAt: sb.ExpiresAt, Data: sb.Data}
	var errs [3]error
	p.Total, errs[0] = apiNumber("total", sb.Total, 0)
	p.Completed, errs[1] = apiNumber("completed", sb.Completed, 0)
	p.CreditsUsed, errs[2] = apiNumber("creditsUsed", sb.CreditsUsed, -1)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("status of crawl %s: %w", crawlID, err)
	}
	if sb.Next != nil {
		p.Next = *sb.Next
	}
	return p, nil
}

// fetch GETs ref on CRAWL_API_URL's host with the key and returns the body
// of a 200, retrying 429, 5xx and network errors with backoff, and a 404
// notFound times (the API may not know a job right after its creation).
// what names the endpoint in errors ("status", "errors").
func (c *Client) fetch(ctx context.Context, what, crawlID, ref string, notFoundRetries int) ([]byte, error) {
	target, err := c.target(ref)
	if err != nil {
		return nil, fmt.Errorf("%s of crawl %s: %w", what, crawlID, err)
	}
	log := c.log.With().Str("crawl_id", crawlID).Str("url", logs.RedactURL(target.String())).Logger()
	notFound := 0
	for attempt := 1; ; attempt++ {
		code, header, body, err := c.do(ctx, target)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("%s of crawl %s: %w", what, crawlID, err)
		}
		var wait time.Duration
		switch {
		case err != nil || code == http.StatusTooManyRequests || code >= 500:
			if attempt >= c.cfg.Attempts {
				return nil, fmt.Errorf("%w: %s", ErrUnavailable, describe(code, body, err))
			}
			wait = c.retryWait(attempt, header, body)
			log.Warn().Int("status", code).Err(err).Dur("wait", wait).Int("attempt", attempt).Msg("crawl API busy; retrying")
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return nil, fmt.Errorf("%w: %s", ErrUnauthorized, describe(code, body, nil))
		case code == http.StatusNotFound:
			if notFound >= notFoundRetries {
				return nil, fmt.Errorf("%w: %s", ErrNotFound, describe(code, body, nil))
			}
			wait = backoff.Exponential{First: c.cfg.NotFoundWait, Max: c.cfg.MaxBackoff}.Delay(notFound + 1)
			notFound++
			log.Info().Dur("wait", wait).Msg("crawl not found yet; retrying")
		case code == http.StatusOK:
			return body, nil
		default:
			return nil, fmt.Errorf("%s of crawl %s: %s", what, crawlID, describe(code, body, nil))
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

func (c *Client) do(ctx context.Context, target *url.URL) (int, http.Header, []byte, error) {
	// The request's URL is the url.URL value itself, never a string parsed
	// again, so what was checked is what is dialled.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return 0, nil, nil, err
	}
	u := *target
	req.URL, req.Host = &u, u.Host
	req.Header.Set("Authorization", "Bearer "+c.cfg.Key)
	req.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		// url.Error repeats the URL (never the headers): redact it like any
		// URL bound for a log line or a stored error.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = logs.RedactURL(ue.URL)
		}
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBodyBytes+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read response: %w", err)
	}
	if int64(len(body)) > c.cfg.MaxBodyBytes {
		return resp.StatusCode, resp.Header, nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, c.cfg.MaxBodyBytes)
	}
	return resp.StatusCode, resp.Header, body, nil
}

var errTooLarge = errors.New("response too large")

var retryAfterText = regexp.MustCompile(`(?i)retry after (\d+(?:\.\d+)?)\s*s`)

// retryWait is the wait before attempt+1: the Retry-After header (seconds or
// an HTTP date), else the "retry after Ns" of the error text (the API's 429
// has no header), else exponential backoff with jitter. Every wait taken
// from the answer is clamped to [0, MaxBackoff] while still a float or a
// time, before it becomes a Duration: "retry after 99999999999s" would
// overflow into a negative Duration and the API would be hammered. A value
// that is no wait at all (negative seconds, NaN) is ignored.
func (c *Client) retryWait(attempt int, h http.Header, body []byte) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if d, ok := c.secondsWait(v); ok {
			return d
		}
		if t, err := http.ParseTime(v); err == nil {
			// Time.Sub saturates instead of overflowing; a date in the
			// past means now.
			return min(max(t.Sub(c.now()), 0), c.cfg.MaxBackoff)
		}
	}
	if m := retryAfterText.FindSubmatch(body); m != nil {
		if d, ok := c.secondsWait(string(m[1])); ok {
			return d
		}
	}
	return backoff.Exponential{First: c.cfg.MinBackoff, Max: c.cfg.MaxBackoff, Jitter: true}.Delay(attempt)
}

// secondsWait parses a number of seconds and clamps it to [0, MaxBackoff].
func (c *Client) secondsWait(s string) (time.Duration, bool) {
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	// ParseFloat answers ±Inf with ErrRange for a number too large.
	if math.IsNaN(secs) || secs < 0 {
		return 0, false
	}
	if secs >= c.cfg.MaxBackoff.Seconds() {
		return c.cfg.MaxBackoff, true
	}
	return time.Duration(secs * float64(time.Second)), true
}

// describe summarises an answer for errors and logs: status and the API's
// error text, bounded.
func describe(code int, body []byte, err error) string {
	if err != nil {
		return err.Error()
	}
	var e struct {
		Error string `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	} else {
		msg = strings.TrimSpace(string(body))
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return fmt.Sprintf("HTTP %d %s", code, msg)
}
