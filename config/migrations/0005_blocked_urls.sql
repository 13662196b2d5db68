-- blocked_urls: the URLs robots.txt kept a crawl or batch scrape from
-- scraping, as the crawl API lists them under robotsBlocked of
-- GET /v2/crawl/{id}/errors (or /v2/batch/scrape/{id}/errors). The backfill
-- records them when it reads a finished job's errors.
--
-- They are not failures: nothing was fetched, the site asked not to be.
-- Kept apart from `failures` so that they never count in `crawls.failures`
-- nor toward the failure alerts, and apart from `pages` so that they are
-- never taken for an archived page. ReplacingMergeTree keyed by
-- (crawl_id, url): a URL listed again by a later backfill is one row under
-- FINAL. Operational data like failures: expires after 180 days.
CREATE TABLE IF NOT EXISTS {{table "blocked_urls"}}{{on_cluster}}
(
    crawl_id    UUID,
    url         String CODEC(ZSTD(1)),
    recorded_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = {{engine "ReplacingMergeTree" "recorded_at"}}
ORDER BY (crawl_id, url)
TTL toDateTime(recorded_at) + INTERVAL 180 DAY;

{{distributed "blocked_urls" "cityHash64(crawl_id, url)"}}
