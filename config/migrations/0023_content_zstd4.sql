-- content compressed at ZSTD(4) instead of ZSTD(6) (0017).
--
-- ZSTD(6) bought 4.5% fewer bytes of content for twice ZSTD(3)'s
-- compression work, and ClickHouse pays that work again at every merge of
-- the small parts a sink writes (a batch of at most SINK_BATCH_SIZE
-- deliveries an insert): while the sink ran, ClickHouse spent 326-368 µs of
-- CPU a page, 209 with merges stopped and 246 with content at ZSTD(3), so
-- that the sink reached only 0.61-0.78 of ClickHouse's own copy of the same
-- rows. ZSTD(4) keeps more than half of the saving (content 2.4% smaller
-- than at ZSTD(3), against 4.8% at ZSTD(6), on one crawl's 20 000 pages of
-- the benchmark corpus) for about half the extra work, and the archive
-- stays within 1.15 times the Documents stored once at ZSTD(3)
-- (docs/benchmarks.md, "The sink's cost per page").
--
-- As in 0017 only the codec changes: parts written or merged from now on
-- use it, existing parts keep theirs until a merge rewrites them, and
-- decompression is as fast at every level. Run again, the statement sets
-- the same codec.
ALTER TABLE {{table "pages"}}{{on_cluster}}
    MODIFY COLUMN content String CODEC(ZSTD(4));
