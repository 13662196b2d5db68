-- Retention as configured (RETENTION_* in config/environment.md), applied
-- by the sink at start whenever this text or the settings differ from the
-- last applied (archive.ApplyRetention). Rendered like a migration, with the
-- settings as data: .PageDays, .KeepVersions, .FailureDays, .EventDays (0:
-- kept for ever).
--
-- Every statement sets a state rather than changes one (CREATE OR REPLACE,
-- MODIFY TTL, REMOVE TTL only where a TTL is set), so a sink stopped after
-- any of them runs the whole file again and ends where one run ends; the
-- settings are recorded only once the last statement ran.
--
-- ClickHouse enforces the TTLs itself, in its background merges, and
-- MODIFY TTL first recomputes them for the parts already stored (a mutation,
-- materialize_ttl_after_modify), so a shorter retention applies to existing
-- rows too. Expired rows go at the next merge of their part: within
-- merge_with_ttl_timeout (4 hours by default), or at once with
-- OPTIMIZE TABLE ... FINAL.
--
-- pages: a row older than .PageDays goes unless its job is one of the
-- newest .KeepVersions jobs of its URL (retained_versions, migration 0015):
-- the latest version of every URL and the one before stay whatever their
-- age. page_versions and job_starts are not expired: about 60 bytes a
-- version, they keep change tracking's history of every URL complete.
CREATE OR REPLACE VIEW {{global "retained_versions"}}{{on_cluster}} AS
SELECT
    v.url AS url,
    arrayMap(x -> x.2, arraySlice(arrayReverseSort(groupArray((j.started_at, v.crawl_id))), 1, {{.KeepVersions}})) AS crawl_ids
FROM {{global "page_versions"}} AS v FINAL
GLOBAL INNER JOIN
(
    SELECT crawl_id, assumeNotNull(coalesce(min(webhook_at), min(backfill_at))) AS started_at
    FROM {{global "job_starts"}}
    GROUP BY crawl_id
) AS j ON v.crawl_id = j.crawl_id
GROUP BY v.url;

-- The dictionary must answer before a TTL names it: a merge whose TTL
-- cannot evaluate fails, and a table that cannot merge soon refuses inserts.
SELECT length(dictGet('{{view "retained_versions_dict"}}', 'crawl_ids', tuple('')));

{{define "has_ttl"}}(SELECT count() FROM {{system "tables"}} WHERE concat(database, '.', name) = '{{.}}' AND engine_full LIKE '% TTL %') > 0{{end}}
{{if .PageDays}}
ALTER TABLE {{table "pages"}}{{on_cluster}}
    MODIFY TTL toDateTime(received_at) + INTERVAL {{.PageDays}} DAY
        DELETE WHERE NOT has(dictGet('{{view "retained_versions_dict"}}', 'crawl_ids', tuple(url)), crawl_id);
{{else}}
-- if: {{template "has_ttl" (table "pages")}}
ALTER TABLE {{table "pages"}}{{on_cluster}} REMOVE TTL;
{{end}}
{{if .FailureDays}}
ALTER TABLE {{table "failures"}}{{on_cluster}}
    MODIFY TTL toDateTime(received_at) + INTERVAL {{.FailureDays}} DAY;
{{else}}
-- if: {{template "has_ttl" (table "failures")}}
ALTER TABLE {{table "failures"}}{{on_cluster}} REMOVE TTL;
{{end}}
{{if .EventDays}}
ALTER TABLE {{table "events"}}{{on_cluster}}
    MODIFY TTL toDateTime(received_at) + INTERVAL {{.EventDays}} DAY;
{{else}}
-- if: {{template "has_ttl" (table "events")}}
ALTER TABLE {{table "events"}}{{on_cluster}} REMOVE TTL;
{{end}}
