-- Change tracking, part two: a URL removed because a complete recrawl of
-- the same scope no longer found it (docs/search.md, "What changed").
-- page_changes (0013) classes the versions that exist; a URL a job did not
-- find has no version in that job, so its removal is its own view here,
-- page_removals.
--
-- The crawl API does not say which options a job was started with, so a
-- job's scope is what the team puts in the webhook metadata of the crawl
-- request, which the API echoes in every delivery (pages.webhook_metadata):
--
--   "scope": "<name>"  the crawl being repeated: the same start URL and the
--                      same options that bound what it finds (includePaths,
--                      excludePaths, maxDepth, allowSubdomains...). A team
--                      changes the name when it changes those.
--   "limit": <n>       the crawl request's page limit.
--
-- Jobs of the same kind, scope and limit have the same scope. A job without
-- both keys never reports a removal by absence (only 404 and 410 do).
--
-- job_scopes: per job, its scope, its limit and the URLs it found (every
-- row of pages: fetched, gone or failed), merged from every insert.
-- Hostile metadata is bounded: the scope is cut to 256 bytes, the limit
-- clamped to [0, 1e12].
CREATE TABLE IF NOT EXISTS {{table "job_scopes"}}{{on_cluster}}
(
    crawl_id   UUID,
    job_kind   SimpleAggregateFunction(max, String),
    scope      SimpleAggregateFunction(max, String),
    page_limit SimpleAggregateFunction(max, UInt64),
    found      AggregateFunction(uniqExact, String)
)
ENGINE = {{engine "AggregatingMergeTree" ""}}
ORDER BY crawl_id;

{{distributed "job_scopes" "cityHash64(crawl_id)"}}

{{define "scopes"}}SELECT
    crawl_id,
    max(toString(job_kind)) AS job_kind,
    max(substring(JSONExtractString(webhook_metadata, 'scope'), 1, 256)) AS scope,
    max(toUInt64(least(greatest(JSONExtractFloat(webhook_metadata, 'limit'), 0), 1e12))) AS page_limit,
    uniqExactState(url) AS found
FROM {{.}}
GROUP BY crawl_id{{end}}
CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "job_scopes_from_pages"}}{{on_cluster}}
TO {{table "job_scopes"}} AS
{{template "scopes" (table "pages")}};

-- The jobs archived before the view above existed; run again, it merges to
-- the same values.
INSERT INTO {{global "job_scopes"}}
{{template "scopes" (global "pages")}};

-- job_ends: how each job ended, from its lifecycle events (crawl_events)
-- and its backfill (backfill_states: a run that read the job to its end
-- records the API's final status as api_status=...).
--
--   complete  the job ended completed (its <kind>.completed event, or the
--             API's status when the backfill read it to the end), nothing
--             says it was cancelled or failed, and its backfill, when the
--             sink runs one, is done: the pages the webhook path lost are
--             archived. A job cancelled, failed or still being backfilled
--             is not complete. A backfill done once stays done: a later
--             run (a replayed end event, `sink backfill`, the API having
--             forgotten the job) takes back nothing it archived, so a
--             complete job stays complete and its removals stand.
--
-- A job that stopped at its page limit is not complete either; that is
-- judged in page_removals, where the limit is known.
CREATE VIEW IF NOT EXISTS {{global "job_ends"}}{{on_cluster}} AS
SELECT
    crawl_id,
    max(ended = 'completed') AS completed,
    max(ended IN ('cancelled', 'failed')) AS stopped,
    argMaxIf(state, at, source = 'backfill') AS backfill_state,
    max(at) AS ended_at,
    max(source = 'backfill' AND state = 'done') AS backfill_done,
    completed AND NOT stopped AND (countIf(source = 'backfill') = 0 OR backfill_done) AS complete
FROM
(
    SELECT
        crawl_id,
        'event' AS source,
        multiIf(endsWith(type, '.completed'), 'completed', endsWith(type, '.cancelled'), 'cancelled', endsWith(type, '.failed'), 'failed', '') AS ended,
        '' AS state,
        received_at AS at
    FROM {{global "crawl_events"}}
    WHERE ended != ''
    UNION ALL
    SELECT
        crawl_id,
        'backfill' AS source,
        if(state = 'done', extract(detail, 'api_status=(\\w+)'), '') AS ended,
        toString(state) AS state,
        updated_at AS at
    FROM {{global "backfill_states"}}
)
GROUP BY crawl_id;

-- page_removals: one row per URL that a complete job did not find and the
-- previous complete job of the same scope found alive (fetched, not 404 or
-- 410), with that job's id. Complete jobs of a scope are put in order by
-- when they started (job_starts), as page_changes orders versions; a job
-- whose found URLs reached its limit stopped at the limit and is left out,
-- both as a job reporting removals and as the job compared with.
--
-- A URL found again by a later job is no longer removed there: that job has
-- a version of it, classed in page_changes against its last version. A URL
-- a job found but could not fetch (a failed scrape, a robots-blocked URL)
-- is not removed.
CREATE VIEW IF NOT EXISTS {{global "page_removals"}}{{on_cluster}} AS
WITH complete_jobs AS
(
    SELECT s.crawl_id AS crawl_id, s.job_kind AS job_kind, s.scope AS scope, s.page_limit AS page_limit, st.started_at AS started_at
    FROM
    (
        SELECT crawl_id, max(job_kind) AS job_kind, max(scope) AS scope, max(page_limit) AS page_limit, uniqExactMerge(found) AS found
        FROM {{global "job_scopes"}}
        GROUP BY crawl_id
    ) AS s
    GLOBAL INNER JOIN (SELECT crawl_id FROM {{global "job_ends"}} WHERE complete) AS e ON s.crawl_id = e.crawl_id
    GLOBAL INNER JOIN
    (
        SELECT crawl_id, assumeNotNull(coalesce(min(webhook_at), min(backfill_at))) AS started_at
        FROM {{global "job_starts"}}
        GROUP BY crawl_id
    ) AS st ON s.crawl_id = st.crawl_id
    WHERE s.scope != '' AND s.page_limit > 0 AND s.found < s.page_limit
)
SELECT
    j.crawl_id AS crawl_id,
    v.url AS url,
    j.previous_crawl_id AS previous_crawl_id,
    j.job_kind AS job_kind,
    j.scope AS scope,
    j.started_at AS job_started_at,
    'removed' AS change
FROM
(
    SELECT crawl_id, job_kind, scope, started_at, assumeNotNull(previous) AS previous_crawl_id
    FROM
    (
        SELECT crawl_id, job_kind, scope, started_at,
            lagInFrame(toNullable(crawl_id)) OVER (PARTITION BY job_kind, scope, page_limit ORDER BY started_at, crawl_id
                ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS previous
        FROM complete_jobs
    )
    WHERE previous IS NOT NULL
) AS j
GLOBAL INNER JOIN
(
    SELECT crawl_id, url
    FROM {{global "page_versions"}} FINAL
    WHERE status_code NOT IN (404, 410)
) AS v ON v.crawl_id = j.previous_crawl_id
WHERE (j.crawl_id, v.url) GLOBAL NOT IN
(
    SELECT crawl_id, url FROM {{global "pages"}} WHERE crawl_id GLOBAL IN (SELECT crawl_id FROM complete_jobs)
    UNION ALL
    SELECT crawl_id, url FROM {{global "blocked_urls"}} WHERE crawl_id GLOBAL IN (SELECT crawl_id FROM complete_jobs)
);
