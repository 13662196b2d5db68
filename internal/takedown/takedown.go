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
	KindURL    Kind = "url"    // exactly this URL
	KindPrefix Kind = "prefix" // every URL starting with this string
	KindHost   Kind = "host"   // every URL of this host (the host alone, no port)
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

// NewSelector checks a selector: a known kind, a value of at most
// MaxValueBytes of valid UTF-8 without control characters, an http(s) URL
// for url and prefix (a prefix at least as long as "https://h" so that it
// never selects every page), a host without scheme, path or port, a job id
// that is a UUID (normalised to lower case).
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
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("%q is not an http(s) URL with a host", value)
		}
	case KindHost:
		if strings.ContainsAny(value, "/:@?# ") {
			return bad("%q must be a host name alone (no scheme, port or path)", value)
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

// MatchURL reports whether the selector covers a row of URL u; job selectors
// never match by URL (see MatchJob).
func (s Selector) MatchURL(u string) bool {
	switch s.Kind {
	case KindURL:
		return u == s.Value
	case KindPrefix:
		return strings.HasPrefix(u, s.Value)
	case KindHost:
		return Host(u) == s.Value
	}
	return false
}

// MatchJob reports whether the selector covers the rows of job id.
func (s Selector) MatchJob(id string) bool {
	return s.Kind == KindJob && strings.EqualFold(id, s.Value)
}

// Host is a URL's host as ClickHouse's domain() reads it (pages.host): the
// name without user, port or brackets; "" when u has none.
func Host(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Hostname()
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
	return anyString(v, s.MatchURL)
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
