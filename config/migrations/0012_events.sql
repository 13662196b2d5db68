-- events: deliveries of the types that are neither a page nor a job's
-- lifecycle (events.ClassRaw): extract.*, monitor.*, agent.* and whatever
-- types the API adds later. Each is kept whole, as received, with its type
-- and job id, whatever its data holds (an object, extraction results,
-- monitor results): the receiver answers them 2xx, so they are kept here
-- rather than refused for their shape. job_id is a String: a monitor's
-- check id or an extract id need not be a crawl's UUID, and nothing here
-- drives backfill. webhook_id is the delivery's webhookId, or the key the
-- receiver derived from the body when it had none; one row per delivery
-- under FINAL.
CREATE TABLE IF NOT EXISTS {{table "events"}}{{on_cluster}}
(
    job_id      String,
    type        LowCardinality(String),
    webhook_id  UUID,
    success     Bool,
    error       String CODEC(ZSTD(1)),
    event       String CODEC(ZSTD(3)),
    received_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = {{engine "ReplacingMergeTree" "received_at"}}
ORDER BY (job_id, type, webhook_id);

{{distributed "events" "cityHash64(job_id)"}}

-- monitor_pages: the per-URL change status a monitor check reports
-- (monitor.page: same, changed, new, removed, error), one row per check and
-- URL under FINAL. The scrape ids name the page versions the check compared:
-- pages.scrape_id holds them for pages archived from crawls.
CREATE TABLE IF NOT EXISTS {{table "monitor_pages"}}{{on_cluster}}
(
    check_id           String,
    monitor_id         String,
    url                String,
    status             LowCardinality(String),
    previous_scrape_id String,
    current_scrape_id  String,
    is_meaningful      Nullable(Bool),
    error              String CODEC(ZSTD(1)),
    webhook_id         UUID,
    received_at        DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = {{engine "ReplacingMergeTree" "received_at"}}
ORDER BY (check_id, url);

{{distributed "monitor_pages" "cityHash64(check_id)"}}
