package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// Bounds of what a request may ask; a parameter past them is refused
// (400 naming it), never silently cut, except limit which is clamped.
const (
	defaultLimit = 50
	maxLimit     = 100
	maxTextBytes = 1000
	maxURLBytes  = 8192
	maxHostBytes = 253
	// maxLinkBytes bounds a cursor, and the page a sign-in returns to. The
	// pages take back every link they write: a cursor is the archive's
	// (it holds the last item's URL, escaped, encoded and signed, and the
	// archive checks its length and signature itself), so the pages' bound
	// is what the reader's server reads of a request at all (the 64 KiB
	// of readercmd's MaxHeaderBytes), never one of their own below it.
	maxLinkBytes = 64 << 10
)

// params reads a request's query parameters, remembering the first one
// refused. Each getter returns the zero value once an error is held.
type params struct {
	values url.Values
	err    error
}

// paramsOf returns the params of a request's query string.
func paramsOf(r *http.Request) *params { return &params{values: r.URL.Query()} }

func (p *params) invalid(name, reason string) {
	if p.err == nil {
		p.err = &query.ParamError{Param: name, Reason: reason}
	}
}

// text returns a parameter of at most maxBytes valid UTF-8, trimmed.
func (p *params) text(name string, maxBytes int) string {
	v := strings.TrimSpace(p.values.Get(name))
	switch {
	case len(v) > maxBytes:
		p.invalid(name, "longer than "+strconv.Itoa(maxBytes)+" bytes")
		return ""
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		p.invalid(name, "not valid text")
		return ""
	}
	return v
}

// job returns a job id parameter: "" or a UUID.
func (p *params) job(name string) string {
	v := p.text(name, 64)
	if v == "" {
		return ""
	}
	id, err := uuid.Parse(v)
	if err != nil {
		p.invalid(name, "not a job id (a UUID)")
		return ""
	}
	return id.String()
}

// limit returns limit clamped to [1, maxLimit], defaultLimit when absent.
func (p *params) limit() int {
	v := p.text("limit", 20)
	if v == "" {
		return defaultLimit
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.invalid("limit", "not a number")
		return 0
	}
	return min(max(n, 1), maxLimit)
}

// oneOf returns a parameter that is "" or one of allowed.
func (p *params) oneOf(name string, allowed ...string) string {
	v := p.text(name, 64)
	if v == "" {
		return ""
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.invalid(name, "not one of "+strings.Join(allowed, ", "))
	return ""
}

// status returns an HTTP status parameter as an inclusive range: a code
// (404) or a class (4xx); 0, 0 when absent.
func (p *params) status(name string) (lo, hi uint16) {
	v := strings.ToLower(p.text(name, 3))
	if v == "" {
		return 0, 0
	}
	if len(v) == 3 && v[1:] == "xx" && v[0] >= '1' && v[0] <= '5' {
		lo = uint16(v[0]-'0') * 100
		return lo, lo + 99
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 || n > 599 {
		p.invalid(name, "not an HTTP status code (100 to 599) or class (4xx)")
		return 0, 0
	}
	return uint16(n), uint16(n)
}

// Time layouts a time parameter may have: what an <input type=date> or
// datetime-local sends, and RFC 3339. Times without a zone are UTC.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", dateLayout}

const dateLayout = "2006-01-02"

// time returns a time parameter; the zero time when absent. With
// endOfDay, a date alone means the end of that day (an "until" that
// includes the day named).
func (p *params) time(name string, endOfDay bool) time.Time {
	v := p.text(name, 64)
	if v == "" {
		return time.Time{}
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			if endOfDay && layout == dateLayout {
				t = t.AddDate(0, 0, 1)
			}
			return t.UTC()
		}
	}
	p.invalid(name, "not a date (2006-01-02) or time (RFC 3339)")
	return time.Time{}
}

// kind returns a job kind parameter.
func (p *params) kind(name string) string {
	return p.oneOf(name, events.KindCrawl, events.KindBatchScrape)
}

// requiredURL returns the url parameter: present, at most maxURLBytes.
func (p *params) requiredURL(name string) string {
	v := p.text(name, maxURLBytes)
	if v == "" && p.err == nil {
		p.invalid(name, "missing")
	}
	return v
}

// span returns a range of time parameters: from (inclusive) and to
// (exclusive; a date alone includes the day named), either zero when
// absent. from must be before to.
func (p *params) span(from, to string) (time.Time, time.Time) {
	a, b := p.time(from, false), p.time(to, true)
	if !a.IsZero() && !b.IsZero() && !a.Before(b) {
		p.invalid(from, "must be before "+to)
	}
	return a, b
}
