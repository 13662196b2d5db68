-- pages: one row per page version, the searchable archive.
--
-- ReplacingMergeTree keyed by (crawl_id, url): a page delivered twice (the
-- sender's retries beyond the stream's duplicate window, a sink redelivery
-- after a crash, a redrive) collapses to one row, so `FINAL` never shows a
-- page twice. received_at is the version: the newest delivery of a URL wins,
-- and a backfilled success (received when fetched) replaces an earlier failed
-- delivery of the same URL.
--
-- No PARTITION BY: background merges deduplicate only inside a partition, and
-- a time partition would keep two versions of a page that crossed a month
-- forever. No TTL either: the archive is the product; retention is a decision
-- for the operator (ALTER TABLE ... MODIFY TTL).
--
-- ORDER BY (crawl_id, url) is also the access path: every question is about
-- one crawl first ("what did crawl X fetch", "is URL Y of crawl X there").
--
-- Codecs: the bodies (markdown, html, document) are large and repetitive
-- text, ZSTD(3) roughly halves them again over LZ4 for little CPU on insert;
-- short strings get ZSTD(1); times are monotonic within a part, Delta first.
-- `document` repeats markdown and html inside the raw JSON: the price of
-- keeping every field as received (SPEC §2), kept compressed.
--
-- Search: text (inverted) skip indexes on title and markdown, tokens split on
-- non-letters and lower-cased, so hasToken/hasAnyTokens/hasAllTokens skip
-- granules without the word (docs/search.md).
CREATE TABLE IF NOT EXISTS {{table "pages"}}{{on_cluster}}
(
    crawl_id    UUID,
    url         String CODEC(ZSTD(1)),
    scrape_id   String CODEC(ZSTD(1)),
    webhook_id  UUID,
    origin      LowCardinality(String),
    success     Bool,
    status_code UInt16,
    title       String CODEC(ZSTD(3)),
    markdown    String CODEC(ZSTD(3)),
    html        String CODEC(ZSTD(3)),
    error       String CODEC(ZSTD(1)),
    document    String CODEC(ZSTD(3)),
    received_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1)),
    inserted_at DateTime64(3, 'UTC') DEFAULT now64(3) CODEC(Delta, ZSTD(1)),
    INDEX title_text title TYPE text(tokenizer = splitByNonAlpha, preprocessor = lower(title)),
    INDEX markdown_text markdown TYPE text(tokenizer = splitByNonAlpha, preprocessor = lower(markdown))
)
ENGINE = {{engine "ReplacingMergeTree" "received_at"}}
ORDER BY (crawl_id, url);

{{distributed "pages" "cityHash64(crawl_id, url)"}}
