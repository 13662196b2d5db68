-- Retention: what ClickHouse needs to expire old page versions itself while
-- keeping the newest versions of every URL.
--
-- The age limits (RETENTION_* in config/environment.md) are table TTLs that
-- the sink sets from its configuration at every start when they changed
-- (config/retention.sql, archive.ApplyRetention), not here: a migration runs
-- once, a setting changes. This file makes what those TTLs read.
--
-- retained_versions: per URL, the jobs whose version of it is kept
-- whatever its age, the newest RETENTION_KEEP_VERSIONS of them (at least two:
-- the latest version and the one before, which change tracking compares and
-- the read API serves). Jobs are put in order as page_changes orders them
-- (job_starts, then job id), so "previous" means the same thing to both. The
-- view reads page_versions (one small row per version that says something
-- about the page), through the table of the whole cluster: the versions
-- of one URL are spread over the shards by job. config/retention.sql
-- creates it, with the configured count, before any TTL reads it.
--
-- retained_versions_dict (made here): the view as a dictionary with the DIRECT layout,
-- so that a TTL expression can ask it (dictGet) during a merge. DIRECT
-- holds nothing in memory: each lookup is one query of the view for the
-- URLs of the block being merged, which reads page_versions by its key
-- (url first). A URL it does not know (only failed fetches) keeps nothing
-- past the age.
--
-- retention_settings (made here): the retention last applied, so that the sink runs the
-- retention statements only when the configuration (or their text) changed.
CREATE DICTIONARY IF NOT EXISTS {{view "retained_versions_dict"}}{{on_cluster}}
(
    url       String,
    crawl_ids Array(UUID)
)
PRIMARY KEY url
SOURCE(CLICKHOUSE(DB '{{database}}' TABLE 'retained_versions'))
LAYOUT(COMPLEX_KEY_DIRECT());

CREATE TABLE IF NOT EXISTS {{view "retention_settings"}}{{on_cluster}}
(
    digest     String,
    settings   String,
    applied_at DateTime64(3, 'UTC')
)
ENGINE = {{engine "ReplacingMergeTree" "applied_at"}}
ORDER BY digest;
