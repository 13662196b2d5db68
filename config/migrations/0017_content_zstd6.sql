-- content (a page's markdown then its html, 87% of the archive's bytes) is
-- compressed at ZSTD(6) instead of ZSTD(3): 4.5% fewer bytes per page, for
-- about a tenth more of ClickHouse's CPU per page at insert and no slower
-- reads (zstd decompresses at the same speed whatever the level). Measured
-- with `BENCH_ARCHIVE_PRICE=1 scripts/bench-archive.sh` (docs/benchmarks.md,
-- "The sink's cost per page"): the archive was 1.16x the Documents stored
-- once at ZSTD(3) between merges at 20 000 pages, over the 1.15x it is held
-- to.
--
-- Only the codec changes: parts written from now on, and parts merged,
-- use it; existing parts keep ZSTD(3) until a merge rewrites them. The
-- statement is the same whether it ran before or not, so a migrator
-- stopped here runs it again harmlessly.
ALTER TABLE {{table "pages"}}{{on_cluster}}
    MODIFY COLUMN content String CODEC(ZSTD(6));
