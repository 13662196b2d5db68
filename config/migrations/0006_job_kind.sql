-- Batch scrapes are archived like crawls, cancellations are no outage, and
-- the webhook's custom metadata is kept with every row.
--
-- job_kind tells a crawl (POST /v2/crawl) from a batch scrape (POST
-- /v2/batch/scrape): both send the same page events under their own prefix
-- (crawl.page, batch_scrape.page) and are archived in the same tables, keyed
-- by their job id. Rows written before this migration are crawls: the
-- DEFAULT says so without rewriting them.
--
-- failures.reason is `failed` (an error, or an HTTP status of 400 or more)
-- or `cancelled`: cancelling a job makes the API send one failed page per
-- URL still queued, thousands for a large crawl, and those must stay
-- queryable without counting as failures (alerts read reason != 'cancelled',
-- and so does `crawls.failures`; `crawls.cancelled_pages` counts them).
--
-- webhook_metadata is the event's `metadata` (the job's webhook
-- configuration echoes it in every delivery) as received, so that rows can
-- be told apart by what the user attached to the job.
ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS job_kind LowCardinality(String) DEFAULT 'crawl' AFTER crawl_id,
    ADD COLUMN IF NOT EXISTS webhook_metadata String DEFAULT '' CODEC(ZSTD(1)) AFTER document;

ALTER TABLE {{table "failures"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS job_kind LowCardinality(String) DEFAULT 'crawl' AFTER crawl_id,
    ADD COLUMN IF NOT EXISTS reason LowCardinality(String) DEFAULT 'failed' AFTER error,
    ADD COLUMN IF NOT EXISTS webhook_metadata String DEFAULT '' CODEC(ZSTD(1)) AFTER reason;

{{if on_cluster}}
ALTER TABLE {{global "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS job_kind LowCardinality(String) DEFAULT 'crawl' AFTER crawl_id,
    ADD COLUMN IF NOT EXISTS webhook_metadata String DEFAULT '' AFTER document;

ALTER TABLE {{global "failures"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS job_kind LowCardinality(String) DEFAULT 'crawl' AFTER crawl_id,
    ADD COLUMN IF NOT EXISTS reason LowCardinality(String) DEFAULT 'failed' AFTER error,
    ADD COLUMN IF NOT EXISTS webhook_metadata String DEFAULT '' AFTER reason;
{{end}}

-- crawl_stats gains the job's kind (max of '' and the kind: a job has one)
-- and the count of cancelled pages; failed_urls stops counting them.
ALTER TABLE {{table "crawl_stats"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS job_kind SimpleAggregateFunction(max, String) DEFAULT '',
    ADD COLUMN IF NOT EXISTS cancelled_urls AggregateFunction(uniqExact, String);

{{if on_cluster}}
ALTER TABLE {{global "crawl_stats"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS job_kind SimpleAggregateFunction(max, String) DEFAULT '',
    ADD COLUMN IF NOT EXISTS cancelled_urls AggregateFunction(uniqExact, String);
{{end}}

DROP VIEW IF EXISTS {{view "crawl_stats_from_failed_urls"}}{{on_cluster}};

CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "crawl_stats_from_failure_reasons"}}{{on_cluster}}
TO {{table "crawl_stats"}} AS
SELECT
    crawl_id,
    uniqExactStateIf(url, reason != 'cancelled') AS failed_urls,
    uniqExactStateIf(url, reason = 'cancelled') AS cancelled_urls,
    max(toString(job_kind)) AS job_kind
FROM {{table "failures"}}
GROUP BY crawl_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "crawl_stats_kind_from_pages"}}{{on_cluster}}
TO {{table "crawl_stats"}} AS
SELECT crawl_id, max(toString(job_kind)) AS job_kind
FROM {{table "pages"}}
GROUP BY crawl_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "crawl_stats_kind_from_events"}}{{on_cluster}}
TO {{table "crawl_stats"}} AS
SELECT crawl_id, max(if(startsWith(toString(type), 'batch_scrape.'), 'batch_scrape', 'crawl')) AS job_kind
FROM {{table "crawl_events"}}
GROUP BY crawl_id;

CREATE OR REPLACE VIEW {{global "crawls"}}{{on_cluster}} AS
SELECT
    crawl_id,
    if(max(job_kind) = '', 'crawl', max(job_kind)) AS kind,
    nullIf(minMerge(first_delivery_at), toDateTime64(0, 3, 'UTC')) AS first_delivery_at,
    nullIf(maxMerge(last_delivery_at), toDateTime64(0, 3, 'UTC')) AS last_delivery_at,
    uniqExactMerge(pages) AS pages_received,
    uniqExactMerge(backfilled_pages) AS pages_backfilled,
    uniqExactMerge(failed_urls) AS failures,
    uniqExactMerge(cancelled_urls) AS cancelled_pages,
    argMaxMerge(status) AS last_event,
    argMaxMerge(backfill_state) AS backfill_state
FROM {{global "crawl_stats"}}
GROUP BY crawl_id;
