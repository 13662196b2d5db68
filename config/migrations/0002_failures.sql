-- failures: one row per failed page delivery or failed document (success
-- false, metadata.error set, or status_code >= 400). It is what on-call reads
-- when an alert fires.
--
-- The key (crawl_id, webhook_id, url) makes a redelivered failure one row
-- under FINAL. Failures are operational data, not archive: they expire after
-- 180 days (the page row itself stays in `pages`). ttl_only_drop_parts is not
-- set because parts mix times; the TTL merge drops expired rows.
CREATE TABLE IF NOT EXISTS {{table "failures"}}{{on_cluster}}
(
    crawl_id    UUID,
    webhook_id  UUID,
    url         String CODEC(ZSTD(1)),
    status_code UInt16,
    error       String CODEC(ZSTD(1)),
    received_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = {{engine "ReplacingMergeTree" "received_at"}}
ORDER BY (crawl_id, webhook_id, url)
TTL toDateTime(received_at) + INTERVAL 180 DAY;

{{distributed "failures" "cityHash64(crawl_id, webhook_id)"}}
