// Package takedown is what an operator's request to remove content is: a
// selector (one URL, a URL prefix, a host, or a job) and the rules that say
// which rows and which stored deliveries it covers. It knows neither
// ClickHouse nor NATS: internal/archive deletes the rows and keeps the audit
// record and the write-path filter, internal/delivery deletes the stored
// deliveries, and `sink delete` runs them all.
package takedown

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Kind is what a selector names.
type Kind string

// The kinds of selector, as `sink delete` spells their flags and the
// takedowns table stores them.
const (
	KindURL    Kind = "url"    // exactly this URL (Location: any spelling of its origin)
	KindPrefix Kind = "prefix" // every URL under this one (Location.HasPrefix: same origin, whole path segments)
	KindHost   Kind = "host"   // every URL of this host (NormalizeHost: any spelling, any port)
	KindJob    Kind = "job"    // every row of this crawl or batch scrape
)

// MaxValueBytes bounds a selector's value (a URL of the archive can be that
// long; a longer value selects nothing anyway).
const MaxValueBytes = 8192

// ErrInvalid is wrapped by every error of a malformed selector.
var ErrInvalid = errors.New("invalid takedown selector")

// Selector says which content a takedown removes.
type Selector struct {
	Kind  Kind
	Value string
}

// NewSelector checks a selector and keeps its value in the one spelling
// takedowns compare (so the audit record and --list show what is matched):
// a known kind, a value of at most MaxValueBytes of valid UTF-8 without
// control characters; for url and prefix an http(s) URL with a host, kept
// as its Location (scheme and host normalised, default port and userinfo
// dropped: "HTTPS://Example.COM.:443" is "https://example.com/"); a host
// without scheme, path or port, kept normalised (NormalizeHost); a job id
// that is a UUID, in lower case.
func NewSelector(kind Kind, value string) (Selector, error) {
	bad := func(format string, a ...any) (Selector, error) {
		return Selector{}, fmt.Errorf("%w: %s %s", ErrInvalid, kind, fmt.Sprintf(format, a...))
	}
	if value == "" {
		return bad("is empty")
	}
	if len(value) > MaxValueBytes || !utf8.ValidString(value) || strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return bad("must be at most %d bytes of printable UTF-8", MaxValueBytes)
	}
	switch kind {
	case KindURL, KindPrefix:
		u, err := url.Parse(value)
		loc, ok := ParseLocation(value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !ok {
			return bad("%q is not an http(s) URL with a host", value)
		}
		value = loc.String()
	case KindHost:
		if strings.ContainsAny(value, "/:@?#\\ ") {
			return bad("%q must be a host name alone (no scheme, port or path)", value)
		}
		if value = NormalizeHost(value); value == "" {
			return bad("is empty")
		}
	case KindJob:
		id, err := uuid.Parse(value)
		if err != nil {
			return bad("%q is not a job id (a UUID)", value)
		}
		value = id.String()
	default:
		return Selector{}, fmt.Errorf("%w: kind %q is not url, prefix, host or job", ErrInvalid, kind)
	}
	return Selector{Kind: kind, Value: value}, nil
}

func (s Selector) String() string { return "--" + string(s.Kind) + " " + s.Value }

// MatchURL reports whether the selector covers a row of URL u, whichever
// spelling of its origin u has; job selectors never match by URL (see
// MatchJob).
func (s Selector) MatchURL(u string) bool {
	return newMatcher([]Selector{s}).matchURL(u)
}

// MatchJob reports whether the selector covers the rows of job id.
func (s Selector) MatchJob(id string) bool {
	return s.Kind == KindJob && strings.EqualFold(id, s.Value)
}

// MatchBody reports whether the selector covers a stored delivery: the job
// id it was filed under (jobID, from the message's headers), else its body,
// read loosely (a quarantined body need not be valid): the top-level "id"
// or "jobId" for a job selector, any string value anywhere in it for a URL
// selector (the Documents' metadata.url and sourceURL, a monitor's URLs).
// A body that is not JSON matches only by jobID.
func (s Selector) MatchBody(jobID string, body []byte) bool {
	if s.MatchJob(jobID) {
		return true
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	if s.Kind == KindJob {
		top, _ := v.(map[string]any)
		for _, k := range []string{"id", "jobId"} {
			if id, ok := top[k].(string); ok && s.MatchJob(id) {
				return true
			}
		}
		return false
	}
	return anyString(v, newMatcher([]Selector{s}).matchURL)
}

// anyString reports whether f holds for some string value inside v.
func anyString(v any, f func(string) bool) bool {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		for _, e := range x {
			if anyString(e, f) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if anyString(e, f) {
				return true
			}
		}
	}
	return false
}
