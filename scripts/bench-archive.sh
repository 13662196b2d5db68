#!/usr/bin/env bash
# bench-archive.sh: what the ClickHouse archive costs at scale. tools/archivebench generates a
# seeded corpus of crawl.page deliveries (10 sites crawled 5 times, Zipf vocabulary, markdown
# 2-20 kB, html 2-4x) and inserts it through the sink's insert path into a fresh schema; in the
# same run the same rows into a copy without text indexes or views, and the same Documents into
# one ZSTD(3) column. It prints bytes per page and per column, insert rates at 10k/100k/1M pages,
# search p50/p99 with and without the text indexes, and p50/p99 of every query of
# docs/search.md on the loaded archive. See docs/benchmarks.md (## Archive at scale).
#
# Environment:
#   BENCH_ARCHIVE_PAGES       page deliveries (default 20000, a bounded `make bench`;
#                             100000 takes 17-20 minutes here; 1000000 (the full run) took 57 minutes
#                             of inserts and 13 of searches with BENCH_ARCHIVE_OPTIMIZE=0 and
#                             BENCH_ARCHIVE_QUERY_RUNS=5, and 20 GB of disk: 7.4 kB/page archive,
#                             6.7 the copy, 6.6 the baseline; OPTIMIZE needs room for a second copy
#                             of the largest table)
#   BENCH_ARCHIVE_SEED        corpus seed (default 1)
#   BENCH_ARCHIVE_QUERY_RUNS  timed runs of each query, with and without indexes (default 7)
#   BENCH_ARCHIVE_OPTIMIZE    0 to measure the parts as the inserts left them (default: OPTIMIZE FINAL)
#   BENCH_ARCHIVE_PRICE       1 to also price each index, view, materialized column and text codec at
#                             insert: the pages copied server-side into the schema without it, with
#                             ClickHouse's CPU per page and the bytes (docs/benchmarks.md)
#   BENCH_ARCHIVE_COPIES      0 to insert the archive alone, without the copy and the baseline (a 1M fill in
#                             about half the time; bytes then print no ratio). With -insert-only the tool
#                             stops after inserting, and a later run with -reuse and the same
#                             BENCH_ARCHIVE_DATA, pages and seed measures the loaded archive, e.g. on a
#                             quieter machine
#   BENCH_ARCHIVE_DATA        directory for the benchmark's ClickHouse (default a temporary one
#                             under $TMPDIR, removed at the end; needs ~100 kB per page free)
# The benchmark always starts a ClickHouse of its own (it drops and loads databases, gigabytes
# at 100k pages), whatever CLICKHOUSE_ADDR says; extra arguments go to the tool (-h lists them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
unset CLICKHOUSE_ADDR CLICKHOUSE_HTTP CLICKHOUSE_PID
data=${BENCH_ARCHIVE_DATA:-$(mktemp -d "${TMPDIR:-/tmp}/crawlhouse-bench-archive.XXXXXX")}
mkdir -p "$data"
cleanup() {
  bash scripts/clickhouse.sh stop --data "$data" >/dev/null 2>&1 || true
  [ -n "${BENCH_ARCHIVE_DATA:-}" ] || rm -rf "$data"
}
trap cleanup EXIT
eval "$(bash scripts/clickhouse.sh ensure --data "$data")"
export CLICKHOUSE_PID
echo "bench-archive: ClickHouse at $CLICKHOUSE_ADDR, data in $data ($(df -h --output=source,fstype,size,avail "$data" | tail -n 1 | tr -s ' '))"
go build -o "$data/archivebench" ./tools/archivebench
"$data/archivebench" -addr "$CLICKHOUSE_ADDR" "$@"
echo "bench-archive: $(du -sh "$data/clickhouse" | cut -f1) in the ClickHouse data directory at the end"
