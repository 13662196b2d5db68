-- Change tracking's text hash computed by the sink, not by the view.
--
-- page_versions_from_pages (0013, its query replaced in 0014) hashed every
-- inserted page's markdown itself: it read the page's text back out of
-- content and ran replaceRegexpAll, trimBoth and cityHash64 over it, on the
-- insert path, for every page (docs/benchmarks.md, Change tracking). The
-- sink holds the markdown when it builds the row, so it now computes the
-- same hash (archive.TextHasher: the same normalisation, the same
-- CityHash64, bit for bit, so that versions hashed here and versions hashed
-- before compare as they did) and writes it in pages.text_hash, and the view
-- reads no text.
--
-- pages.text_hash: DEFAULT 0, not the SQL expression, so that reading a
-- part written before this migration (SELECT *, a merge) never computes it.
-- 0 means "not computed": the rows archived before, and a row inserted by a
-- sink of an older version during a rolling upgrade (its INSERT names no
-- text_hash).
ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS text_hash UInt64 DEFAULT 0 AFTER content_hash;

{{if on_cluster}}
-- On a cluster the sink inserts through the Distributed table, which needs
-- the column too; after the local tables, so that no insert through it
-- names a column a shard lacks.
ALTER TABLE {{global "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS text_hash UInt64 DEFAULT 0 AFTER content_hash;
{{end}}

-- The view takes pages.text_hash when it is set, and otherwise computes it
-- as before, with 0014's expression unchanged: the rows an older sink
-- inserts get the same hash either way. if() evaluates its branches only
-- on the rows that take them (short-circuit evaluation, on by default), so
-- the regular expression runs only over rows whose text_hash is 0. A 404 or
-- 410 page is 0, as before, whatever the sink wrote. MODIFY QUERY swaps the
-- query atomically: no insert meets the view missing.
ALTER TABLE {{view "page_versions_from_pages"}}{{on_cluster}} MODIFY QUERY
SELECT
    url,
    crawl_id,
    job_kind,
    origin,
    status_code,
    if(status_code IN (404, 410), 0, if(text_hash != 0, text_hash, cityHash64(trimBoth(replaceRegexpAll(markdown,
        '[\\s\\x0B\\x{85}\\p{Z}]{2,}|[\\t\\n\\f\\r\\x0B\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]', ' '))))) AS text_hash,
    received_at
FROM {{table "pages"}}
WHERE status_code IN (404, 410) OR (success AND status_code < 400);
