-- insert order: the changes feed (the reader's GET /v1/changes) walks pages
-- and failures in the order the archive received them, from a cursor. pages
-- has had inserted_at since 0001; failures gets it here.
--
-- The column is added with received_at as its default and materialized, so
-- the rows already stored get a fixed value (a DEFAULT now64(3) would be
-- computed anew at every read of a part written before the column existed);
-- only then does the default become the insert time.
--
-- A minmax index on inserted_at lets the feed skip the granules before its
-- cursor: rows are inserted in time order, so each part spans a short range.
ALTER TABLE {{table "failures"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS inserted_at DateTime64(3, 'UTC') DEFAULT received_at CODEC(Delta, ZSTD(1));

ALTER TABLE {{table "failures"}}{{on_cluster}}
    MATERIALIZE COLUMN inserted_at
    SETTINGS mutations_sync = 2;

ALTER TABLE {{table "failures"}}{{on_cluster}}
    MODIFY COLUMN inserted_at DateTime64(3, 'UTC') DEFAULT now64(3) CODEC(Delta, ZSTD(1));

ALTER TABLE {{table "failures"}}{{on_cluster}}
    ADD INDEX IF NOT EXISTS inserted_minmax inserted_at TYPE minmax GRANULARITY 1;

ALTER TABLE {{table "failures"}}{{on_cluster}}
    MATERIALIZE INDEX inserted_minmax
    SETTINGS mutations_sync = 2;

ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD INDEX IF NOT EXISTS inserted_minmax inserted_at TYPE minmax GRANULARITY 1;

ALTER TABLE {{table "pages"}}{{on_cluster}}
    MATERIALIZE INDEX inserted_minmax
    SETTINGS mutations_sync = 2;

{{if on_cluster}}
ALTER TABLE {{global "failures"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS inserted_at DateTime64(3, 'UTC') DEFAULT now64(3);
{{end}}
