-- Search newest first without FINAL: the read API's search (and any query
-- ORDER BY received_at DESC LIMIT n) reads the newest matches first. A
-- minmax index on received_at lets ClickHouse's top-K read only the
-- granules that can hold them: each granule of pages holds a few pages of
-- one job received close together (pages is ordered by job and URL), so
-- its span of received_at is short. At a million pages, a word every page
-- holds was read from 37 000 rows instead of all of them (docs/benchmarks.md,
-- Read API).
--
-- Both statements can run again: the index is added if missing, and
-- materializing it again writes the same index.
ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD INDEX IF NOT EXISTS received_minmax received_at TYPE minmax GRANULARITY 1;

ALTER TABLE {{table "pages"}}{{on_cluster}}
    MATERIALIZE INDEX received_minmax
    SETTINGS mutations_sync = 2;
