#!/usr/bin/env bash
# bench-sink.sh: what the sink costs, from a pre-filled JetStream stream into ClickHouse by the
# sink binary: documents/s, the sink's own CPU per page and MB of Documents per sink CPU-second,
# its CPU profile by category (the profile file is named in the output) and peak RSS, beside the
# ceiling measured in the same run (ClickHouse's own INSERT ... SELECT of the same rows into a
# freshly migrated schema), for ~5 kB and ~35 kB pages (10 sites crawled 4 times, a fifth of the
# pages slightly edited between crawls, the rest unchanged: internal/testkit/crawlcorpus) and 1 MB
# pages; the bytes of the sink's pages, search indexes included, against the same Documents stored
# once in one column at ZSTD(3) (BenchmarkSinkBytes: each column and index's share of those bytes,
# between merges and merged, and what storing each URL's unchanged text once would leave); and its
# rate alone against its rate while 16 clients search phrases that match nothing
# (BenchmarkSinkUnderSearches, the ratio printed).
# See docs/benchmarks.md (## Sink).
#
# Environment: BENCH_SINK_DOCS (default 50000 ~5 kB pages), BENCH_SINK_MEDIUM (default 5000
# ~35 kB pages), BENCH_SINK_LARGE (default 300 1 MB pages), SINK_BATCH_SIZE and SINK_BATCH_BYTES
# (the sink's shape; its defaults else), BENCH_READERS_DOCS (default 20000), BENCH_READERS_THREADS,
# BENCH_READERS_QUERIES, BENCH_SINK_PROFILE (the CPU profile's file), BENCH_SINK_SCHEMA (statements run
# after the migrations, {db} the database: a codec or index tried), BENCH_SINK_CHANGE (BenchmarkSinkBytes:
# the share of pages changed between crawls, default 0.2), CLICKHOUSE_ADDR (else a local
# ClickHouse of its own, whose CPU is then reported for the ceiling too).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -z "${CLICKHOUSE_ADDR:-}" ]; then
  # A ClickHouse of its own, stopped and removed when the benchmark ends.
  data=$(mktemp -d "${TMPDIR:-/tmp}/crawlhouse-bench-ch.XXXXXX")
  trap 'bash scripts/clickhouse.sh stop --data "$data" >/dev/null 2>&1 || true; rm -rf "$data"' EXIT
  eval "$(bash scripts/clickhouse.sh ensure --data "$data")"
  export CLICKHOUSE_ADDR CLICKHOUSE_PID
fi
echo "bench-sink: ClickHouse at $CLICKHOUSE_ADDR"
go test -run '^$' -bench 'BenchmarkSink' -benchtime 1x -count 1 -timeout 30m ./internal/sink/ |
  grep -E '^(Benchmark|    [a-z_]*bench[a-z_]*_test|ok|FAIL|PASS)' | sed -E 's/^    [a-z_]*bench[a-z_]*_test.go:[0-9]+: /    /'
