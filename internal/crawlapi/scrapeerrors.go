package crawlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ScrapeError is one failed scrape of a job as the crawl API's errors
// endpoint lists it. The API lists every failed scrape there, whether or not
// its failed-page webhook arrived, and lists failed pages nowhere else: it
// is how the backfill recovers failures whose deliveries were lost.
type ScrapeError struct {
	// ID is the scrape job's id (bounded to maxErrorIDBytes).
	ID string
	// URL is the page that failed.
	URL string
	// Code is the error's code (SCRAPE_…) when the API gives one.
	Code string
	// Error is the error text, bounded to maxErrorTextBytes.
	Error string
	// Timestamp is when the scrape failed; zero when absent or unreadable.
	Timestamp time.Time
}

// ErrorsPage is the answer of GET /v2/crawl/{id}/errors (or
// /v2/batch/scrape/{id}/errors).
type ErrorsPage struct {
	// Errors are the failed scrapes, at most one per URL, in the API's
	// order.
	Errors []ScrapeError
	// RobotsBlocked are the URLs robots.txt kept the job from scraping:
	// not failures, nothing was fetched. At most maxRobotsBlocked of them,
	// of at most maxRobotsBlockedBytes in all, each at most
	// maxBlockedURLBytes long.
	RobotsBlocked []string
	// RobotsBlockedCut counts the robotsBlocked URLs left out by those
	// bounds (they count in Skipped too).
	RobotsBlockedCut int
	// Skipped counts entries dropped: not an object, no URL, a URL listed
	// twice, or beyond the bounds.
	Skipped int
}

// Bounds on what an errors answer may put in the archive. The whole answer
// is already bounded by MaxBodyBytes; these keep one entry's strings and
// the entry count within what an operator can use.
const (
	maxErrorEntries   = 1 << 20
	maxErrorTextBytes = 8 << 10
	maxErrorIDBytes   = 128
	maxErrorCodeBytes = 128
)

// Bounds on the robots-blocked URLs one errors answer may record. They are
// a list for an operator to read, not pages: a hostile or broken API
// answering millions of them (an answer may hold 64 MB) must not make the
// backfill read back and insert millions of rows into blocked_urls. A
// URL longer than maxBlockedURLBytes is left out rather than cut, since a
// cut URL is another URL.
const (
	maxRobotsBlocked      = 10000
	maxRobotsBlockedBytes = 4 << 20
	maxBlockedURLBytes    = 8 << 10
)

type errorsBody struct {
	Errors        []json.RawMessage `json:"errors"`
	RobotsBlocked []json.RawMessage `json:"robotsBlocked"`
}

type errorEntry struct {
	ID        json.RawMessage `json:"id"`
	Timestamp json.RawMessage `json:"timestamp"`
	URL       json.RawMessage `json:"url"`
	Code      json.RawMessage `json:"code"`
	Error     json.RawMessage `json:"error"`
}

// Errors reads the errors endpoint at ref (ErrorsRef) with the key, on
// CRAWL_API_URL's host only, with the status endpoint's retries of 429, 5xx
// and network errors. A 404 is not retried: the job's status was just read,
// so a 404 here means an API without the endpoint (or a job that expired
// meanwhile), and waiting would only hold a backfill worker. It returns
// ErrNotFound (wrapped) for it, which callers take as "no errors to add",
// ErrUnauthorized and ErrUnavailable as Get does.
func (c *Client) Errors(ctx context.Context, crawlID, ref string) (*ErrorsPage, error) {
	body, err := c.fetch(ctx, "errors", crawlID, ref, 0)
	if err != nil {
		return nil, err
	}
	p, err := decodeErrors(body)
	if err != nil {
		return nil, fmt.Errorf("errors of crawl %s: %w", crawlID, err)
	}
	return p, nil
}

// decodeErrors reads an errors answer leniently, entry by entry: a bad
// entry is skipped and counted, never a reason to lose the others. Every
// string is bounded.
func decodeErrors(body []byte) (*ErrorsPage, error) {
	var b errorsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if b.Errors == nil && b.RobotsBlocked == nil {
		// A 200 that is not the errors answer (an HTML page, another
		// object) must not read as "no failures".
		return nil, errors.New("decode: neither errors nor robotsBlocked in the answer")
	}
	p := &ErrorsPage{}
	seen := make(map[string]bool, len(b.Errors))
	for _, raw := range b.Errors {
		if len(p.Errors) >= maxErrorEntries {
			p.Skipped++
			continue
		}
		var e errorEntry
		if json.Unmarshal(raw, &e) != nil {
			p.Skipped++
			continue
		}
		se := ScrapeError{
			ID:    bounded(jsonString(e.ID), maxErrorIDBytes),
			URL:   strings.TrimSpace(jsonString(e.URL)),
			Code:  bounded(jsonString(e.Code), maxErrorCodeBytes),
			Error: bounded(jsonString(e.Error), maxErrorTextBytes),
		}
		if t, err := time.Parse(time.RFC3339Nano, jsonString(e.Timestamp)); err == nil {
			se.Timestamp = t
		}
		if se.URL == "" || seen[se.URL] {
			p.Skipped++
			continue
		}
		if se.Error == "" {
			// A failure is recorded with a reason; the API always gives
			// one, so this only keeps the row meaningful.
			se.Error = "scrape failed"
		}
		seen[se.URL] = true
		p.Errors = append(p.Errors, se)
	}
	blocked := make(map[string]bool, min(len(b.RobotsBlocked), maxRobotsBlocked))
	size := 0
	for _, raw := range b.RobotsBlocked {
		u := strings.TrimSpace(jsonString(raw))
		switch {
		case u == "" || blocked[u]:
			p.Skipped++
		case len(u) > maxBlockedURLBytes || len(p.RobotsBlocked) >= maxRobotsBlocked || size+len(u) > maxRobotsBlockedBytes:
			p.Skipped++
			p.RobotsBlockedCut++
		default:
			blocked[u] = true
			size += len(u)
			p.RobotsBlocked = append(p.RobotsBlocked, u)
		}
	}
	return p, nil
}

// jsonString is raw as a string, or "" when it is not a JSON string.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// bounded cuts s to at most n bytes on a rune boundary. s came from
// json.Unmarshal, which makes it valid UTF-8: only the cut can split a
// rune, and at most UTFMax-1 bytes of it are left to drop.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for i := 0; i < utf8.UTFMax && !utf8.ValidString(s); i++ {
		s = s[:len(s)-1]
	}
	return s + "…"
}
