-- One materialized view per insert into pages for everything kept per job.
--
-- Until now an insert into pages ran four views that each keep a row per
-- job: crawl_stats_from_pages and crawl_stats_kind_from_pages (0003, 0006:
-- the job's counts and its kind), job_starts_from_pages (0013: when the job
-- started) and job_metadata_from_pages (0014: its webhook metadata). Each
-- view writes a part of its own for every insert, and ClickHouse then merges
-- those small parts: with the page_versions view, six parts per insert. The
-- parts, not the few rows in them, were the price (docs/benchmarks.md,
-- Change tracking). From here crawl_stats_from_pages computes all of it and
-- writes one part to crawl_stats: three parts per insert.
--
-- job_starts and job_metadata stay, under the same names and with the same
-- columns, as views over crawl_stats, so every reader (page_changes,
-- page_removals, job_scopes, the retention's retained_versions, a sink of
-- the version before this one during a rolling upgrade) reads what it read.
--
-- The steps, each safe to run again from any point (a migrator stopped
-- after any of them runs the file again from its start):
--   1. crawl_stats gains the per-job columns; the one view computes them.
--   2. What job_starts and job_metadata hold is copied into crawl_stats
--      (minimum and maximum: copying twice changes nothing), while they are
--      still tables; first every INSERT begun before step 1 ends, so that
--      none adds a job's start to the old table after the copy.
--   3. The old views are dropped; each table is swapped by name with the
--      view that replaces it (EXCHANGE, only while the name is still a
--      table) and then dropped. An insert between the drop and the swap
--      adds its job's start to crawl_stats only: a job whose first page
--      arrives in those milliseconds is missing from the old table until the
--      swap, never after.
ALTER TABLE {{table "crawl_stats"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS first_webhook_page_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    ADD COLUMN IF NOT EXISTS first_backfilled_page_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    ADD COLUMN IF NOT EXISTS webhook_metadata SimpleAggregateFunction(max, String) DEFAULT '';

{{if on_cluster}}
ALTER TABLE {{global "crawl_stats"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS first_webhook_page_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    ADD COLUMN IF NOT EXISTS first_backfilled_page_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    ADD COLUMN IF NOT EXISTS webhook_metadata SimpleAggregateFunction(max, String) DEFAULT '';
{{end}}

-- The one view. first_webhook_page_at and first_backfilled_page_at are
-- job_starts' webhook_at and backfill_at (a job's first page delivered by
-- webhook, its first page archived otherwise); job_kind and
-- webhook_metadata are what crawl_stats_kind_from_pages and job_metadata
-- kept. MODIFY QUERY swaps the query atomically: no insert meets the view
-- missing.
ALTER TABLE {{view "crawl_stats_from_pages"}}{{on_cluster}} MODIFY QUERY
SELECT
    crawl_id,
    minStateIf(received_at, origin = 'webhook') AS first_delivery_at,
    maxStateIf(received_at, origin = 'webhook') AS last_delivery_at,
    uniqExactStateIf(url, origin = 'webhook') AS pages,
    uniqExactStateIf(url, origin = 'backfill') AS backfilled_pages,
    max(toString(job_kind)) AS job_kind,
    min(if(origin = 'webhook', toNullable(received_at), NULL)) AS first_webhook_page_at,
    min(if(origin = 'webhook', NULL, toNullable(received_at))) AS first_backfilled_page_at,
    max(webhook_metadata) AS webhook_metadata
FROM {{table "pages"}}
GROUP BY crawl_id;

{{define "is_table"}}(SELECT count() FROM {{system "tables"}} WHERE concat(database, '.', name) = '{{global .}}' AND engine != 'View') > 0{{end}}
-- wait: inserts
-- if: {{template "is_table" "job_starts"}}
INSERT INTO {{global "crawl_stats"}} (crawl_id, first_webhook_page_at, first_backfilled_page_at)
SELECT crawl_id, min(webhook_at), min(backfill_at)
FROM {{global "job_starts"}}
GROUP BY crawl_id;

-- if: {{template "is_table" "job_metadata"}}
INSERT INTO {{global "crawl_stats"}} (crawl_id, job_kind, webhook_metadata)
SELECT crawl_id, max(job_kind), max(webhook_metadata)
FROM {{global "job_metadata"}}
GROUP BY crawl_id;

DROP VIEW IF EXISTS {{view "crawl_stats_kind_from_pages"}}{{on_cluster}};

DROP VIEW IF EXISTS {{view "job_starts_from_pages"}}{{on_cluster}};

DROP VIEW IF EXISTS {{view "job_metadata_from_pages"}}{{on_cluster}};

-- A job known to crawl_stats only by its failures or lifecycle events has
-- no page: neither view shows it, as neither table held it.
{{define "has_pages"}}HAVING min(first_webhook_page_at) IS NOT NULL OR min(first_backfilled_page_at) IS NOT NULL{{end}}
CREATE VIEW IF NOT EXISTS {{global "job_starts_replacement"}}{{on_cluster}} AS
SELECT crawl_id, min(first_webhook_page_at) AS webhook_at, min(first_backfilled_page_at) AS backfill_at
FROM {{global "crawl_stats"}}
GROUP BY crawl_id
{{template "has_pages"}};

CREATE VIEW IF NOT EXISTS {{global "job_metadata_replacement"}}{{on_cluster}} AS
SELECT crawl_id, max(job_kind) AS job_kind, max(webhook_metadata) AS webhook_metadata
FROM {{global "crawl_stats"}}
GROUP BY crawl_id
{{template "has_pages"}};

-- if: {{template "is_table" "job_starts"}}
EXCHANGE TABLES {{global "job_starts"}} AND {{global "job_starts_replacement"}}{{on_cluster}};

-- if: {{template "is_table" "job_metadata"}}
EXCHANGE TABLES {{global "job_metadata"}} AND {{global "job_metadata_replacement"}}{{on_cluster}};

-- The old tables, now under the replacements' names (or the replacement
-- views themselves, where a run stopped after the drops made them again).
DROP TABLE IF EXISTS {{global "job_starts_replacement"}}{{on_cluster}} SYNC;

DROP TABLE IF EXISTS {{global "job_metadata_replacement"}}{{on_cluster}} SYNC;

{{if on_cluster}}
-- On a cluster the names above are the Distributed tables; the shards'
-- tables go too.
DROP TABLE IF EXISTS {{table "job_starts"}}{{on_cluster}} SYNC;

DROP TABLE IF EXISTS {{table "job_metadata"}}{{on_cluster}} SYNC;
{{end}}
