// Package backfill recovers what the webhook path missed: the pages, and
// the failed scrapes, of crawls and batch scrapes. It reads a job's results
// from the crawl API's GET /v2/crawl/{id} (a batch scrape's GET
// /v2/batch/scrape/{id}), following next chunk by chunk, and archives the
// pages the archive does not hold yet, with origin "backfill"; once a
// finished job is read to its end, it reads GET .../{id}/errors and records
// the failed scrapes the archive lacks (once per URL) and, apart from
// failures, the robots-blocked URLs.
//
// The parts, one per file:
//
//   - Client (client.go, scrapeerrors.go) makes one status or errors
//     request: the bearer key goes only to CRAWL_API_URL's scheme, host and
//     port (a next link is resolved with net/url and refused unless it
//     names that host and port); 429 and 5xx are retried with backoff
//     (Retry-After, else the "retry after Ns" of the error text, else
//     exponential, every wait clamped to MaxBackoff); an early 404 of the
//     status is retried, a lasting one is ErrNotFound; a 404 of the errors
//     endpoint is an API without it.
//   - Kinds (kind.go): a job's kind comes from its deliveries' event type
//     prefix (crawl., batch_scrape.) and picks its endpoints.
//   - Pager (pager.go) follows next with the stop rule and bounds, handing
//     each chunk to a callback: a job is never held in memory whole.
//   - Reconciler (reconcile.go) inserts what is missing through a PageStore,
//     saving its cursor after each chunk in a StateStore, under a lease, so a
//     restart resumes and two sink replicas never work on one job at once.
//   - KVStore (kv.go) is the StateStore on a JetStream key-value bucket; a
//     job's record keeps its kind.
//   - Scheduler (scheduler.go) decides when: a job quiet for the quiet
//     period, the end of a job (crawl.completed, crawl.failed,
//     crawl.cancelled, batch_scrape.completed, batch_scrape.failed,
//     batch_scrape.cancelled), a job still scraping revisited later, or an
//     explicit one-off run.
package backfill
