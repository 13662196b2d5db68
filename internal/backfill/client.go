package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
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
	return &Client{cfg: cfg, base: base, log: log}, nil
}

// StatusPage is one chunk of a crawl's status.
type StatusPage struct {
	// Status is scraping, completed, cancelled or failed.
	Status string
	// Total is the number of pages attempted, Completed those that
	// succeeded.
	Total       int
	Completed   int
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
	Total       int               `json:"total"`
	Completed   int               `json:"completed"`
	CreditsUsed int               `json:"creditsUsed"`
	ExpiresAt   time.Time         `json:"expiresAt"`
	Next        *string           `json:"next"`
	Data        []events.Document `json:"data"`
	Error       string            `json:"error"`
}

// FirstRef is the reference of a crawl's first status page.
func FirstRef(crawlID string) string { return "/v2/crawl/" + url.PathEscape(crawlID) }

// Ref turns a next link into the reference the client follows: its path and
// query only. A link to another host is refused with ErrForeignNext; the
// scheme is ignored (self-hosted APIs put a wrong one there) and a port is
// accepted when it is the base's or the default of the link's scheme.
func (c *Client) Ref(next string) (string, error) {
	u, err := url.Parse(next)
	if err != nil {
		return "", fmt.Errorf("next %q: %w", next, err)
	}
	if u.Host != "" && !c.sameHost(u) {
		return "", fmt.Errorf("%w: %s", ErrForeignNext, u.Host)
	}
	ref := u.EscapedPath()
	if ref == "" {
		ref = "/"
	}
	if u.RawQuery != "" {
		ref += "?" + u.RawQuery
	}
	return ref, nil
}

func (c *Client) sameHost(u *url.URL) bool {
	if !strings.EqualFold(u.Hostname(), c.base.Hostname()) {
		return false
	}
	p := u.Port()
	if p == "" {
		return true
	}
	return p == effectivePort(c.base) || p == defaultPort(u.Scheme)
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

// target is the absolute URL of a reference, on the base's scheme and host.
// A reference that already carries the base's path prefix keeps it as is.
func (c *Client) target(ref string) string {
	path, query, _ := strings.Cut(ref, "?")
	if c.base.Path != "" && !strings.HasPrefix(path, c.base.Path+"/") {
		path = c.base.Path + path
	}
	t := c.base.Scheme + "://" + c.base.Host + path
	if query != "" {
		t += "?" + query
	}
	return t
}

// Get reads the status page at ref (FirstRef or a Ref), retrying as the
// package documentation says. It returns ErrUnauthorized, ErrNotFound,
// ErrUnavailable (wrapped) or another error for a non-retryable answer.
func (c *Client) Get(ctx context.Context, crawlID, ref string) (*StatusPage, error) {
	target := c.target(ref)
	log := c.log.With().Str("crawl_id", crawlID).Str("url", target).Logger()
	notFound := 0
	for attempt := 1; ; attempt++ {
		code, header, body, err := c.do(ctx, target)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("status of crawl %s: %w", crawlID, err)
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
			if notFound >= c.cfg.NotFoundRetries {
				return nil, fmt.Errorf("%w: %s", ErrNotFound, describe(code, body, nil))
			}
			wait = c.cfg.NotFoundWait << notFound
			notFound++
			log.Info().Dur("wait", wait).Msg("crawl not found yet; retrying")
		case code == http.StatusOK:
			var sb statusBody
			if err := json.Unmarshal(body, &sb); err != nil {
				return nil, fmt.Errorf("status of crawl %s: decode: %w", crawlID, err)
			}
			p := &StatusPage{Status: sb.Status, Total: sb.Total, Completed: sb.Completed,
				CreditsUsed: sb.CreditsUsed, ExpiresAt: sb.ExpiresAt, Data: sb.Data}
			if sb.Next != nil {
				p.Next = *sb.Next
			}
			return p, nil
		default:
			return nil, fmt.Errorf("status of crawl %s: %s", crawlID, describe(code, body, nil))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

func (c *Client) do(ctx context.Context, target string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Key)
	req.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		// url.Error repeats the URL, never the headers: safe to log.
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

// retryWait is the wait before attempt+1: the Retry-After header, else the
// "retry after Ns" of the error text (the API's 429 has no header), else
// exponential backoff with jitter. Waits are capped at MaxBackoff.
func (c *Client) retryWait(attempt int, h http.Header, body []byte) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, c.cfg.MaxBackoff)
		}
		if t, err := http.ParseTime(v); err == nil {
			return min(max(time.Until(t), 0), c.cfg.MaxBackoff)
		}
	}
	if m := retryAfterText.FindSubmatch(body); m != nil {
		if s, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
			return min(time.Duration(s*float64(time.Second)), c.cfg.MaxBackoff)
		}
	}
	d := c.cfg.MinBackoff << min(attempt-1, 20)
	d = min(d, c.cfg.MaxBackoff)
	return d/2 + rand.N(d/2+1)
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
