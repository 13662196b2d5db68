package crawlapi

import (
	"net/url"
	"strconv"

	"github.com/crawlhouse/crawlhouse/internal/events"
)

// A reference (FirstRef, a Ref, a saved cursor) is the path and query of a
// status page on CRAWL_API_URL's host: a request URI such as
// "/v2/crawl/{id}?skip=10", never a URL of its own. Only target turns one
// into a URL, always on the base's scheme, host and port, so whatever a
// reference holds, the key goes nowhere else.

// FirstRef is the reference of a crawl's first status page.
func FirstRef(crawlID string) string { return "/v2/crawl/" + url.PathEscape(crawlID) }

// JobRef is the reference of a job's first status page: /v2/crawl/{id} or
// /v2/batch/scrape/{id} ("" counts as a crawl).
func JobRef(kind, id string) string {
	if kind == events.KindBatchScrape {
		return "/v2/batch/scrape/" + url.PathEscape(id)
	}
	return FirstRef(id)
}

// ErrorsRef is the reference of a job's errors endpoint:
// /v2/crawl/{id}/errors or /v2/batch/scrape/{id}/errors.
func ErrorsRef(kind, id string) string { return JobRef(kind, id) + "/errors" }

// SkipOf is the skip parameter of a reference, or -1 when absent or not a
// count (negative, or too large for an int).
func SkipOf(ref string) int {
	u, err := url.Parse(ref)
	if err != nil {
		return -1
	}
	s := u.Query().Get("skip")
	if s == "" {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
