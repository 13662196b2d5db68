// Package crawlapi is crawlhouse's adapter of the crawl API, the one place
// that knows its contract: where a job's status and errors are
// (GET /v2/crawl/{id} and /v2/batch/scrape/{id}, each with /errors), how
// a status pages (next, skip), which statuses are terminal, what its
// answers and refusals mean, and how far a hostile answer is trusted.
// internal/backfill reads jobs through it and `sink status` asks it one
// question; internal/testkit/crawlsim is the fake of exactly this contract.
//
// One concept per file:
//
//   - Client (client.go) makes one request: the bearer key goes only to
//     CRAWL_API_URL's scheme, host and port; 429 and 5xx are retried with
//     backoff (Retry-After, else the "retry after Ns" of the error text,
//     else exponential, every wait clamped to MaxBackoff); a response is
//     bounded; a redirect is never followed.
//   - Statuses (status.go): Get reads one status page, its counts clamped;
//     Terminal says which statuses are final. An early 404 is retried, a
//     lasting one is ErrNotFound.
//   - References (ref.go): a job's first page (JobRef) and errors
//     (ErrorsRef) by its kind, and the skip a reference carries.
//   - Next links (next.go): Ref resolves a page's next against the page,
//     and refuses it (ErrForeignNext) unless it names CRAWL_API_URL's host
//     and port; a saved reference is checked the same way before it is
//     dialled.
//   - The errors endpoint (scrapeerrors.go): Errors reads a job's failed
//     scrapes and robots-blocked URLs, entry by entry and bounded; its 404
//     is an API without the endpoint.
//   - Errors (errors.go): the outcomes callers branch on.
package crawlapi
