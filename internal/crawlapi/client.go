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
		return nil, fmt.Errorf("crawlapi: CRAWL_API_URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("crawlapi: CRAWL_API_URL must be scheme://host[:port][/path] only")
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
