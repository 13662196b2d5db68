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
-- page_versions_from_pages (0013) normalises whitespace with a regular
-- expression that matched every space between two words: ClickHouse then
-- copies the text match by match, which made the view the sink's largest
-- cost. Matching only what the normalisation changes (a run of two or more
-- whitespace characters, or one that is not a plain space) gives the very
-- same text, so the same text_hash for every page archived before, at a
-- tenth of the cost (docs/benchmarks.md, Change tracking). MODIFY QUERY
-- swaps the query atomically: no insert meets the view missing.
ALTER TABLE {{view "page_versions_from_pages"}}{{on_cluster}} MODIFY QUERY
SELECT
    url,
    crawl_id,
    job_kind,
    origin,
    status_code,
    if(status_code IN (404, 410), 0, cityHash64(trimBoth(replaceRegexpAll(markdown,
        '[\\s\\x0B\\x{85}\\p{Z}]{2,}|[\\t\\n\\f\\r\\x0B\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]', ' ')))) AS text_hash,
    received_at
FROM {{table "pages"}}
WHERE status_code IN (404, 410) OR (success AND status_code < 400);

-- job_metadata: per job, its kind and its webhook metadata, merged from
-- every insert into pages (a backfilled row has none; max keeps the
-- delivered one). A group by crawl id per insert: a batch of one crawl adds
-- one row, so this costs the sink next to nothing.
CREATE TABLE IF NOT EXISTS {{table "job_metadata"}}{{on_cluster}}
(
    crawl_id         UUID,
    job_kind         SimpleAggregateFunction(max, String),
    webhook_metadata SimpleAggregateFunction(max, String)
)
ENGINE = {{engine "AggregatingMergeTree" ""}}
ORDER BY crawl_id;

{{distributed "job_metadata" "cityHash64(crawl_id)"}}

{{define "metadata"}}SELECT
    crawl_id,
    max(toString(job_kind)) AS job_kind,
    max(webhook_metadata) AS webhook_metadata
FROM {{.}}
GROUP BY crawl_id{{end}}
CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "job_metadata_from_pages"}}{{on_cluster}}
TO {{table "job_metadata"}} AS
{{template "metadata" (table "pages")}};

-- The jobs archived before the view above existed; run again, it merges to
-- the same values.
INSERT INTO {{global "job_metadata"}}
{{template "metadata" (global "pages")}};

-- job_scopes: per job, the scope and limit its webhook metadata names
-- ('' and 0 when it names none). Hostile metadata is bounded: the scope is
-- cut to 256 bytes, the limit clamped to [0, 1e12].
CREATE VIEW IF NOT EXISTS {{global "job_scopes"}}{{on_cluster}} AS
SELECT
    crawl_id,
    max(job_kind) AS job_kind,
    substring(JSONExtractString(max(webhook_metadata), 'scope'), 1, 256) AS scope,
    toUInt64(least(greatest(JSONExtractFloat(max(webhook_metadata), 'limit'), 0), 1e12)) AS page_limit
FROM {{global "job_metadata"}}
GROUP BY crawl_id;

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
-- previous complete job of the same scope found alive (its row of pages a
-- page fetched, status under 400), with that job's id. Complete jobs of a scope are put in order by
-- when they started (job_starts), as page_changes orders versions; a job
-- whose found URLs reached its limit stopped at the limit and is left out,
-- both as a job reporting removals and as the job compared with.
--
-- A URL found again by a later job is no longer removed there: that job has
-- a version of it, classed in page_changes against its last version. A URL
-- a job found but could not fetch (a failed scrape, a robots-blocked URL)
-- is not removed.
{{/* The jobs with a scope; for one job's removals (job_removals), only
those of its kind, scope and limit. */}}
{{define "scoped"}}scope != '' AND page_limit > 0
{{- if .}} AND (job_kind, scope, page_limit) IN (SELECT job_kind, scope, page_limit FROM {{global "job_scopes"}} WHERE crawl_id = {crawl_id:UUID}){{end}}{{end}}
{{define "removals"}}WITH complete_jobs AS
(
    SELECT s.crawl_id AS crawl_id, s.job_kind AS job_kind, s.scope AS scope, s.page_limit AS page_limit, st.started_at AS started_at
    FROM (SELECT * FROM {{global "job_scopes"}} WHERE {{template "scoped" .}}) AS s
    GLOBAL INNER JOIN (SELECT crawl_id FROM {{global "job_ends"}} WHERE complete) AS e ON s.crawl_id = e.crawl_id
    GLOBAL INNER JOIN
    (
        SELECT crawl_id, assumeNotNull(coalesce(min(webhook_at), min(backfill_at))) AS started_at
        FROM {{global "job_starts"}}
        GROUP BY crawl_id
    ) AS st ON s.crawl_id = st.crawl_id
    -- The URLs the job found: every row of pages (fetched, gone, failed).
    GLOBAL INNER JOIN
    (
        SELECT crawl_id, uniqExact(url) AS found
        FROM {{global "pages"}}
        WHERE crawl_id GLOBAL IN (SELECT crawl_id FROM {{global "job_ends"}} WHERE complete)
          AND crawl_id GLOBAL IN (SELECT crawl_id FROM {{global "job_scopes"}} WHERE {{template "scoped" .}})
        GROUP BY crawl_id
    ) AS f ON s.crawl_id = f.crawl_id
    WHERE f.found < s.page_limit
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
    WHERE previous IS NOT NULL{{if .}} AND crawl_id = {crawl_id:UUID}{{end}}
) AS j
GLOBAL INNER JOIN
(
    SELECT crawl_id, url
    FROM {{global "pages"}} FINAL
    WHERE success AND status_code < 400{{if .}}
      AND crawl_id GLOBAL IN
      (
          SELECT previous FROM
          (
              SELECT crawl_id, lagInFrame(toNullable(crawl_id)) OVER (PARTITION BY job_kind, scope, page_limit ORDER BY started_at, crawl_id
                  ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS previous
              FROM complete_jobs
          )
          WHERE crawl_id = {crawl_id:UUID}
      ){{end}}
) AS v ON v.crawl_id = j.previous_crawl_id
WHERE (j.crawl_id, v.url) GLOBAL NOT IN
(
{{- if .}}
    SELECT crawl_id, url FROM {{global "pages"}} WHERE crawl_id = {crawl_id:UUID}
    UNION ALL
    SELECT crawl_id, url FROM {{global "blocked_urls"}} WHERE crawl_id = {crawl_id:UUID}
{{- else}}
    SELECT crawl_id, url FROM {{global "pages"}} WHERE crawl_id GLOBAL IN (SELECT crawl_id FROM {{global "job_ends"}} WHERE complete)
    UNION ALL
    SELECT crawl_id, url FROM {{global "blocked_urls"}} WHERE crawl_id GLOBAL IN (SELECT crawl_id FROM {{global "job_ends"}} WHERE complete)
{{- end}}
){{end}}
CREATE VIEW IF NOT EXISTS {{global "page_removals"}}{{on_cluster}} AS
{{template "removals" false}};

-- job_removals(crawl_id = '<job id>'): page_removals of one job, reading
-- only the versions of the job it is compared with and the job's own pages
-- (page_removals filtered by job reads every complete job's pages). The
-- change summary uses it.
CREATE VIEW IF NOT EXISTS {{global "job_removals"}}{{on_cluster}} AS
{{template "removals" true}};
