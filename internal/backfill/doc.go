// Package backfill recovers the pages the webhook path missed (SPEC §5). It
// reads a crawl's results from the crawl API's GET /v2/crawl/{id}, following
// next chunk by chunk, and archives the pages the archive does not hold yet,
// with origin "backfill".
//
// The parts, one per file:
//
//   - Client (client.go) makes one status request: the bearer key goes only
//     to CRAWL_API_URL's scheme, host and port (a next link is resolved with
//     net/url and refused unless it names that host and port); 429 and 5xx
//     are retried with backoff (Retry-After, else the "retry after Ns" of the
//     error text, else exponential, every wait clamped to MaxBackoff); an
//     early 404 is retried, a lasting one is ErrNotFound.
//   - Pager (pager.go) follows next with the stop rule and bounds, handing
//     each chunk to a callback: a crawl is never held in memory whole.
//   - Reconciler (reconcile.go) inserts what is missing through a PageStore,
//     saving its cursor after each chunk in a StateStore, under a lease, so a
//     restart resumes and two sink replicas never work on one crawl at once.
//   - KVStore (kv.go) is the StateStore on a JetStream key-value bucket.
//   - Scheduler (scheduler.go) decides when: a crawl quiet for the quiet
//     period, a crawl.completed or crawl.failed event, a crawl still
//     scraping revisited later, or an explicit one-off run.
package backfill
