package crawlapi

import "errors"

// Outcomes of a request to the crawl API that callers branch on.
var (
	// ErrUnauthorized: the API answered 401 or 403; the key is wrong or
	// lacks access. Retrying does not help.
	ErrUnauthorized = errors.New("crawl API refused the key")
	// ErrNotFound: the crawl stayed unknown (404) through the retries; its
	// results have expired (24 h after the crawl) or it never existed.
	ErrNotFound = errors.New("crawl not found (expired)")
	// ErrForeignNext: a next link pointed to another host; it was not
	// followed, so the key was not sent there.
	ErrForeignNext = errors.New("next points to another host")
	// ErrUnavailable: 429 or 5xx (or no answer) persisted through the
	// retries of one request.
	ErrUnavailable = errors.New("crawl API unavailable")
)
