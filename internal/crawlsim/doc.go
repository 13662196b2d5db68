// Package crawlsim is a stand-in for the crawl API, for the demo, the tests
// and load tests (SPEC §7). It does the two things of the real API that
// crawlhouse depends on:
//
//   - API serves GET /v2/crawl/{id} for the crawls it simulates, as the real
//     API behaves: bearer key, skip paging with next (at most 100 documents
//     and 10 MB a page), next present while the crawl runs even when data is
//     empty and absent at the end, data holding successful pages only,
//     expiresAt moving to now+24h on each read, 404 "Job not found" for
//     unknown or expired crawls (optionally also right after creation), and
//     optional 429s without Retry-After whose error text says
//     "retry after Ns".
//   - Sender delivers a crawl's pages as signed crawl.page webhooks (and
//     crawl.started / crawl.completed with data: []), byte-compatible with
//     the real sender, with a rate, a concurrency, a 10 s answer timeout and
//     retries of non-2xx with the same webhookId; deliveries are unordered.
//
// Faults (Faults) make a crawl exercise the paths that lose pages in
// production: duplicate deliveries, dropped deliveries (pages reachable only
// through backfill), failed pages, bad signatures and oversized pages. A run
// produces a Report, printed as a summary and written as a JSON manifest
// that a checker compares with ClickHouse.
package crawlsim
