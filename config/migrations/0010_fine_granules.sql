-- pages in granules of about 256 kB instead of 10 MB.
--
-- A granule is what ClickHouse reads at least: the text index tells which
-- granules hold a page with the searched words, and a check that needs the
-- text (a phrase, LIKE) then decompresses every page of those granules. With
-- the default index_granularity_bytes (10 MB) a granule of crawled pages
-- holds ~300 of them, so one matching page costs 300 pages of reading; at
-- 256 kB it holds ~8. Measured on 100 000 corpus pages: a phrase search 15-25
-- times faster, 5.6% more bytes (docs/benchmarks.md).
--
-- The setting cannot be changed on an existing table, so this migration
-- builds pages anew: a table like pages (same columns, aliases, codecs,
-- indexes, engine and key) with the new setting; every part of pages moved
-- into it (MOVE PARTITION moves files, nothing is copied or rewritten); the two
-- tables swapped by name (EXCHANGE TABLES, atomic: the materialized views and
-- the cluster's table over pages follow the name); the rows an INSERT begun before the
-- swap added to the old table moved over too; the old, empty table dropped.
--
-- Each step is safe to repeat. The move and the swap run only while the new
-- table still has the new setting (so before the swap): a migration stopped
-- after the swap and run again does not swap back. Between the move and the
-- swap, a search sees pages empty for a moment.
--
-- Moved parts keep the granules they were written with until ClickHouse
-- merges them; `OPTIMIZE TABLE crawl.pages FINAL` rewrites them all at once
-- (docs/deployment.md, "Upgrading an archive").
{{define "fine"}}(SELECT count() FROM {{system "tables"}} WHERE concat(database, '.', name) = '{{table "pages"}}_rebuild' AND engine_full LIKE '%index_granularity_bytes = 262144%') > 0{{end}}
CREATE TABLE IF NOT EXISTS {{table "pages"}}_rebuild{{on_cluster}} AS {{table "pages"}}
ENGINE = {{engine "ReplacingMergeTree" "received_at"}}
ORDER BY (crawl_id, url)
SETTINGS index_granularity_bytes = 262144;

-- if: {{template "fine"}}
ALTER TABLE {{table "pages"}}{{on_cluster}}
    MOVE PARTITION tuple() TO TABLE {{table "pages"}}_rebuild;

-- if: {{template "fine"}}
EXCHANGE TABLES {{table "pages"}} AND {{table "pages"}}_rebuild{{on_cluster}};

-- wait: inserts
ALTER TABLE {{table "pages"}}_rebuild{{on_cluster}}
    MOVE PARTITION tuple() TO TABLE {{table "pages"}};

SELECT throwIf(sum(rows) > 0, 'rows left in {{table "pages"}}_rebuild after moving them to {{table "pages"}}: run the migration again')
FROM {{system "parts"}}
WHERE active AND concat(database, '.', table) = '{{table "pages"}}_rebuild';

DROP TABLE IF EXISTS {{table "pages"}}_rebuild{{on_cluster}} SYNC;
