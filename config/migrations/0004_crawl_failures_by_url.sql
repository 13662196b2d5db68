-- crawls.failures counts failed pages once per URL.
--
-- 0003 counted distinct webhook ids of `failures`: every failure the backfill
-- recorded (zero webhook id) counted as one between them, and a URL that
-- failed on delivery and was recorded again by a backfill counted twice. A
-- failed page is now counted as alerts count it (archive.Writer.
-- RecentFailures): once per URL of the crawl. crawl_stats gains failed_urls,
-- fed by a view of its own and seeded from the failures already stored, and
-- `crawls` reads it. The column failures and the view feeding it stay, unread,
-- so that a sink of the previous version still running during the upgrade
-- keeps working.
ALTER TABLE {{table "crawl_stats"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS failed_urls AggregateFunction(uniqExact, String);

{{if on_cluster}}
ALTER TABLE {{global "crawl_stats"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS failed_urls AggregateFunction(uniqExact, String);
{{end}}

CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "crawl_stats_from_failed_urls"}}{{on_cluster}}
TO {{table "crawl_stats"}} AS
SELECT crawl_id, uniqExactState(url) AS failed_urls
FROM {{table "failures"}}
GROUP BY crawl_id;

-- The failures stored before the view above existed. A URL inserted while
-- this runs may reach failed_urls twice, and a repeated run seeds it again:
-- harmless, a distinct count merges them.
INSERT INTO {{global "crawl_stats"}} (crawl_id, failed_urls)
SELECT crawl_id, uniqExactState(url)
FROM {{global "failures"}}
GROUP BY crawl_id;

CREATE OR REPLACE VIEW {{global "crawls"}}{{on_cluster}} AS
SELECT
    crawl_id,
    nullIf(minMerge(first_delivery_at), toDateTime64(0, 3, 'UTC')) AS first_delivery_at,
    nullIf(maxMerge(last_delivery_at), toDateTime64(0, 3, 'UTC')) AS last_delivery_at,
    uniqExactMerge(pages) AS pages_received,
    uniqExactMerge(backfilled_pages) AS pages_backfilled,
    uniqExactMerge(failed_urls) AS failures,
    argMaxMerge(status) AS last_event,
    argMaxMerge(backfill_state) AS backfill_state
FROM {{global "crawl_stats"}}
GROUP BY crawl_id;
