-- crawls: per crawl, first and last delivery, pages received, failures,
-- lifecycle status and backfill state.
--
-- Nothing reads-modifies-writes a counter: several sink replicas insert at
-- once, and a redelivered batch is inserted twice. Instead materialized views
-- turn every insert into pages, failures, crawl_events and backfill_states
-- into partial aggregate states in crawl_stats (AggregatingMergeTree, one row
-- per crawl after merges), and `crawls` is a view that merges them. Counts
-- are exact distinct counts (uniqExact of the URL or webhook id), so a
-- duplicate insert never counts twice.

-- crawl_events: the lifecycle deliveries of a crawl (crawl.started,
-- crawl.completed, crawl.failed, and types this version does not know), kept
-- whole; one row per delivery under FINAL.
CREATE TABLE IF NOT EXISTS {{table "crawl_events"}}{{on_cluster}}
(
    crawl_id    UUID,
    webhook_id  UUID,
    type        LowCardinality(String),
    success     Bool,
    error       String CODEC(ZSTD(1)),
    event       String CODEC(ZSTD(3)),
    received_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = {{engine "ReplacingMergeTree" "received_at"}}
ORDER BY (crawl_id, webhook_id);

{{distributed "crawl_events" "cityHash64(crawl_id)"}}

-- backfill_states: every change of a crawl's backfill state (internal/backfill
-- writes it through archive.Writer.SetBackfillState); the newest wins.
CREATE TABLE IF NOT EXISTS {{table "backfill_states"}}{{on_cluster}}
(
    crawl_id   UUID,
    state      LowCardinality(String),
    detail     String CODEC(ZSTD(1)),
    updated_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = {{engine "MergeTree" ""}}
ORDER BY (crawl_id, updated_at)
TTL toDateTime(updated_at) + INTERVAL 180 DAY;

{{distributed "backfill_states" "cityHash64(crawl_id)"}}

CREATE TABLE IF NOT EXISTS {{table "crawl_stats"}}{{on_cluster}}
(
    crawl_id          UUID,
    first_delivery_at AggregateFunction(min, DateTime64(3, 'UTC')),
    last_delivery_at  AggregateFunction(max, DateTime64(3, 'UTC')),
    pages             AggregateFunction(uniqExact, String),
    backfilled_pages  AggregateFunction(uniqExact, String),
    failures          AggregateFunction(uniqExact, UUID),
    status            AggregateFunction(argMax, String, DateTime64(3, 'UTC')),
    backfill_state    AggregateFunction(argMax, String, DateTime64(3, 'UTC'))
)
ENGINE = {{engine "AggregatingMergeTree" ""}}
ORDER BY crawl_id;

{{distributed "crawl_stats" "cityHash64(crawl_id)"}}

CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "crawl_stats_from_pages"}}{{on_cluster}}
TO {{table "crawl_stats"}} AS
SELECT
    crawl_id,
    minStateIf(received_at, origin = 'webhook') AS first_delivery_at,
    maxStateIf(received_at, origin = 'webhook') AS last_delivery_at,
    uniqExactStateIf(url, origin = 'webhook') AS pages,
    uniqExactStateIf(url, origin = 'backfill') AS backfilled_pages
FROM {{table "pages"}}
GROUP BY crawl_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "crawl_stats_from_failures"}}{{on_cluster}}
TO {{table "crawl_stats"}} AS
SELECT crawl_id, uniqExactState(webhook_id) AS failures
FROM {{table "failures"}}
GROUP BY crawl_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "crawl_stats_from_events"}}{{on_cluster}}
TO {{table "crawl_stats"}} AS
SELECT
    crawl_id,
    minState(received_at) AS first_delivery_at,
    maxState(received_at) AS last_delivery_at,
    argMaxState(toString(type), received_at) AS status
FROM {{table "crawl_events"}}
GROUP BY crawl_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "crawl_stats_from_backfill"}}{{on_cluster}}
TO {{table "crawl_stats"}} AS
SELECT crawl_id, argMaxState(toString(state), updated_at) AS backfill_state
FROM {{table "backfill_states"}}
GROUP BY crawl_id;

-- The view users query. An empty min/max state merges to the epoch: NULL it.
CREATE VIEW IF NOT EXISTS {{global "crawls"}}{{on_cluster}} AS
SELECT
    crawl_id,
    nullIf(minMerge(first_delivery_at), toDateTime64(0, 3, 'UTC')) AS first_delivery_at,
    nullIf(maxMerge(last_delivery_at), toDateTime64(0, 3, 'UTC')) AS last_delivery_at,
    uniqExactMerge(pages) AS pages_received,
    uniqExactMerge(backfilled_pages) AS pages_backfilled,
    uniqExactMerge(failures) AS failures,
    argMaxMerge(status) AS last_event,
    argMaxMerge(backfill_state) AS backfill_state
FROM {{global "crawl_stats"}}
GROUP BY crawl_id;
