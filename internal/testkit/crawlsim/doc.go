// Package crawlsim is a stand-in for the crawl API, for the demo, the tests
// and load tests. It does the things of the real API that crawlhouse
// depends on, for both kinds of job, crawls and batch scrapes:
//
//   - API serves GET /v2/crawl/{id} (a batch scrape's at
//     /v2/batch/scrape/{id}) as the real API behaves: bearer key, skip
//     paging with next (at most 100 documents and 10 MB a page), next
//     present while the job runs even when data is empty, and on a
//     cancelled job, absent at the end of a completed one, data holding
//     successful pages only, expiresAt moving to now+24h on each read, 404
//     "Job not found" for unknown or expired jobs (optionally also right
//     after creation), and optional 429s without Retry-After whose error
//     text says "retry after Ns".
//   - API serves GET .../{id}/errors: every failed scrape of the job so far
//     (whether or not its webhook was sent) and its robots-blocked URLs,
//     or, with NoErrorsEndpoint, the 404 of an API without it.
//   - Sender delivers a job's pages as signed crawl.page (batch_scrape.page)
//     webhooks, and <kind>.started / <kind>.completed (or <kind>.cancelled)
//     with data: [], byte-compatible with the real sender, with a rate, a
//     concurrency, a 10 s answer timeout and retries of non-2xx with the
//     same webhookId; deliveries are unordered.
//
// Faults (Faults) make a job exercise the paths that lose pages in
// production: duplicate deliveries, dropped deliveries (pages reachable only
// through backfill), failed pages, failed pages whose delivery is dropped
// (reachable only through the errors endpoint), bad signatures and
// oversized pages; Options add robots-blocked URLs and cancel a job after K
// pages (the rest fail with the real API's cancellation text). With HTML
// each page's Document carries html too, linking every page the job finds,
// so that a recrawl (Recrawl) edits, breaks, unlinks and adds pages as a
// site does between two crawls. A run
// produces a Report, printed as a summary and written as a JSON manifest
// that a checker compares with ClickHouse.
package crawlsim
