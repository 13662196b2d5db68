-- Columns and indexes for searching across crawls.
--
-- host is the page URL's host, so "all pages of docs.example.com" reads a
-- column instead of parsing every URL at query time. content_hash is a hash
-- of the page's markdown, so "which pages changed between two crawls" compares
-- numbers (the Document's changeTracking says it too, when the crawl asked
-- for it). Both are MATERIALIZED: ClickHouse computes them on insert from
-- columns the sink already writes, and for parts written before this
-- migration on read, so nothing is rewritten.
--
-- The bloom filter indexes let a question about one host or one URL across
-- every crawl (the table is ordered by crawl first) skip the granules that
-- cannot hold it. They cover parts written from now on; older parts are
-- read whole until merged (ALTER TABLE pages MATERIALIZE INDEX … builds them
-- for old parts, at the cost of reading the table once).
ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS host LowCardinality(String) MATERIALIZED domain(url) AFTER url,
    ADD COLUMN IF NOT EXISTS content_hash UInt64 MATERIALIZED cityHash64(markdown) AFTER markdown;

ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD INDEX IF NOT EXISTS host_bloom host TYPE bloom_filter(0.01) GRANULARITY 4,
    ADD INDEX IF NOT EXISTS url_bloom url TYPE bloom_filter(0.01) GRANULARITY 4;

{{if on_cluster}}
ALTER TABLE {{global "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS host LowCardinality(String) MATERIALIZED domain(url) AFTER url,
    ADD COLUMN IF NOT EXISTS content_hash UInt64 MATERIALIZED cityHash64(markdown) AFTER markdown;
{{end}}
