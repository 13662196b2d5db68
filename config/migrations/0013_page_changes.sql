-- Change tracking: every version of a page classified against the version
-- of the same URL that an earlier job archived (docs/search.md, "What
-- changed").
--
-- page_versions: per page version, what the comparison needs and nothing
-- else (about 60 bytes a row), ordered by (url, crawl_id) so that the
-- versions of one URL are next to each other. A materialized view fills it
-- from every insert into pages; ReplacingMergeTree keyed like pages makes a
-- version delivered again (a retry, a replay, a redrive, a backfill of a
-- page already delivered) one row under FINAL, as in pages.
--
-- text_hash is the hash of the page's markdown with every run of whitespace
-- (ASCII and Unicode: tabs, line breaks, no-break and ideographic spaces,
-- line and paragraph separators) made one space and the ends trimmed. Only
-- whitespace is normalised: words in another order hash differently, so a
-- reordered page is changed. pages.content_hash hashes the markdown as
-- received and is kept as it is.
--
-- Only versions that say something about the page are kept: a page fetched
-- (success, HTTP status below 400) and a page answering 404 or 410 (gone).
-- Other failures (a 5xx, a timeout, a cancelled page) tell nothing of the
-- page's content; they stay in pages and failures.
--
-- The class is not stored: page_changes computes it when read, from the
-- rows alone, so it does not depend on the order the rows arrived in, and a
-- row inserted again computes the same class (see the view below).
CREATE TABLE IF NOT EXISTS {{table "page_versions"}}{{on_cluster}}
(
    url         String CODEC(ZSTD(1)),
    crawl_id    UUID,
    job_kind    LowCardinality(String),
    origin      LowCardinality(String),
    status_code UInt16,
    text_hash   UInt64,
    received_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = {{engine "ReplacingMergeTree" "received_at"}}
ORDER BY (url, crawl_id);

{{distributed "page_versions" "cityHash64(crawl_id, url)"}}

{{define "versions"}}SELECT
    url,
    crawl_id,
    job_kind,
    origin,
    status_code,
    if(status_code IN (404, 410), 0, cityHash64(trimBoth(replaceRegexpAll(markdown, '[\\s\\x0B\\x{85}\\p{Z}]+', ' ')))) AS text_hash,
    received_at
FROM {{.}}
WHERE status_code IN (404, 410) OR (success AND status_code < 400){{end}}
CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "page_versions_from_pages"}}{{on_cluster}}
TO {{table "page_versions"}} AS
{{template "versions" (table "pages")}};

-- The pages archived before the view above existed, as pages FINAL shows
-- them. Run again (a migration stopped and resumed) it inserts the same
-- rows again: one row each under FINAL.
INSERT INTO {{global "page_versions"}}
{{template "versions" (printf "%s FINAL" (global "pages"))}};

-- job_starts: when each job started, for putting a URL's versions in
-- order: its first page delivered by webhook, and its first page archived
-- by backfill (the start of a job the backfill alone archived). A minimum
-- per job that merges keep (AggregatingMergeTree): a page delivered again
-- later, or rows merged away in pages or page_versions, never move it.
CREATE TABLE IF NOT EXISTS {{table "job_starts"}}{{on_cluster}}
(
    crawl_id    UUID,
    webhook_at  SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    backfill_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC')))
)
ENGINE = {{engine "AggregatingMergeTree" ""}}
ORDER BY crawl_id;

{{distributed "job_starts" "cityHash64(crawl_id)"}}

{{define "starts"}}SELECT
    crawl_id,
    min(if(origin = 'webhook', toNullable(received_at), NULL)) AS webhook_at,
    min(if(origin = 'webhook', NULL, toNullable(received_at))) AS backfill_at
FROM {{.}}
GROUP BY crawl_id{{end}}
CREATE MATERIALIZED VIEW IF NOT EXISTS {{view "job_starts_from_pages"}}{{on_cluster}}
TO {{table "job_starts"}} AS
{{template "starts" (table "pages")}};

-- The jobs archived before the view above existed; a repeated run takes the
-- same minimum again.
INSERT INTO {{global "job_starts"}}
{{template "starts" (global "pages")}};

-- page_changes: one row per page version with its class and the job of the
-- version it was compared with.
--
-- Jobs are put in order by when they started (job_starts: a job's first
-- webhook delivery of a page, or, for a job archived by backfill alone, the
-- first page the backfill archived), then by job id. The previous version of a URL is its version in the job just
-- before, in that order (lagInFrame over the URL's versions); a job's own
-- redeliveries are one row, so they are never compared with each other.
--
--   change    removed   the page answers 404 or 410, and did not already
--                       in the previous version
--             new       no earlier job archived the URL
--             same      the text is the previous version's after the
--                       whitespace normalisation (or the page was gone
--                       and is still gone)
--             changed   otherwise (a page that answered 404 and is back is
--                       changed)
--
-- Computed when read, not stored at insert: an insert sees only what
-- arrived before it, so a class stored then would depend on the order jobs
-- and backfills arrived in, and on a cluster on which shard answered.
-- Reading costs a pass over page_versions' small columns, in (url, crawl_id)
-- order.
CREATE VIEW IF NOT EXISTS {{global "page_changes"}}{{on_cluster}} AS
SELECT
    url,
    crawl_id,
    job_kind,
    origin,
    status_code,
    text_hash,
    received_at,
    job_started_at,
    multiIf(
        status_code IN (404, 410) AND previous_status_code NOT IN (404, 410), 'removed',
        previous_crawl_id IS NULL, 'new',
        status_code IN (404, 410), 'same',
        previous_status_code NOT IN (404, 410) AND text_hash = previous_text_hash, 'same',
        'changed') AS change,
    previous_crawl_id
FROM
(
    SELECT
        v.url AS url,
        v.crawl_id AS crawl_id,
        v.job_kind AS job_kind,
        v.origin AS origin,
        v.status_code AS status_code,
        v.text_hash AS text_hash,
        v.received_at AS received_at,
        j.started_at AS job_started_at,
        lagInFrame(toNullable(v.crawl_id)) OVER versions AS previous_crawl_id,
        lagInFrame(v.status_code) OVER versions AS previous_status_code,
        lagInFrame(v.text_hash) OVER versions AS previous_text_hash
    FROM {{global "page_versions"}} AS v FINAL
    GLOBAL INNER JOIN
    (
        SELECT crawl_id, assumeNotNull(coalesce(min(webhook_at), min(backfill_at))) AS started_at
        FROM {{global "job_starts"}}
        GROUP BY crawl_id
    ) AS j ON v.crawl_id = j.crawl_id
    WINDOW versions AS (PARTITION BY v.url ORDER BY j.started_at, v.crawl_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
);
