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

// Where a job's endpoints are: its status at its kind's path and its id
// (JobRef), its errors at that and ErrorsPath (ErrorsRef).
const (
	crawlPath       = "/v2/crawl/"
	batchScrapePath = "/v2/batch/scrape/"
	// ErrorsPath follows a job's status path to name its errors endpoint.
	ErrorsPath = "/errors"
)

// JobPath is the path the ids of jobs of kind are appended to:
// /v2/crawl/, or /v2/batch/scrape/ for events.KindBatchScrape ("" counts
// as a crawl).
func JobPath(kind string) string {
	if kind == events.KindBatchScrape {
		return batchScrapePath
	}
	return crawlPath
}

// JobRef is the reference of a job's first status page: /v2/crawl/{id} or
// /v2/batch/scrape/{id} ("" counts as a crawl).
func JobRef(kind, id string) string { return JobPath(kind) + url.PathEscape(id) }

// ErrorsRef is the reference of a job's errors endpoint:
// /v2/crawl/{id}/errors or /v2/batch/scrape/{id}/errors.
func ErrorsRef(kind, id string) string { return JobRef(kind, id) + ErrorsPath }

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
