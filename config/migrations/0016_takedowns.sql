-- takedowns: every request to remove content (`sink delete`), kept as the
-- audit record of what was removed, when, by whom and why, and as the list
-- the sink's write path reads so that what was removed is never archived
-- again (a replayed delivery, a redrive, a backfill) until it is lifted.
--
-- No content is kept: the selector (the URL, prefix, host or job id the
-- operator named), the reason and who asked, the number of rows removed
-- from each table and of stored deliveries from each stream (deleted), and
-- when. Lifting a takedown (`sink delete --lift ID`) inserts the same row
-- with lifted_at set and a newer updated_at: ReplacingMergeTree keyed by
-- id shows the newest under FINAL, and the history of a takedown is its
-- rows without FINAL until they merge.
--
-- Never expired: an audit record is kept for as long as the archive.
CREATE TABLE IF NOT EXISTS {{table "takedowns"}}{{on_cluster}}
(
    id           UUID,
    selector     LowCardinality(String),
    value        String,
    reason       String,
    requested_by String,
    created_at   DateTime64(3, 'UTC'),
    deleted      Map(String, UInt64),
    lifted_at    Nullable(DateTime64(3, 'UTC')),
    lifted_by    String,
    lift_reason  String,
    updated_at   DateTime64(3, 'UTC')
)
ENGINE = {{engine "ReplacingMergeTree" "updated_at"}}
ORDER BY id;

{{distributed "takedowns" "cityHash64(id)"}}
