// Package backfill recovers what the webhook path missed: the pages, and
// the failed scrapes, of crawls and batch scrapes. It reads a job's results
// from the crawl API's GET /v2/crawl/{id} (a batch scrape's GET
// /v2/batch/scrape/{id}), following next chunk by chunk, and archives the
// pages the archive does not hold yet, with origin "backfill"; once a
// finished job is read to its end, it reads GET .../{id}/errors and records
// the failed scrapes the archive lacks (once per URL) and, apart from
// failures, the robots-blocked URLs.
//
// It reaches the crawl API only through internal/crawlapi, the adapter
// that owns the API's contract (the key's host check, retries, next
// links, the errors endpoint); its StatusPager is what it needs of it.
//
// The parts, one per file:
//
//   - Kinds: a job's kind comes from its deliveries' event type prefix
//     (events.KindOf) and picks its endpoints (crawlapi.JobRef); it is
//     kept in the job's Record. ParseKind (kind.go) reads an operator's.
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
