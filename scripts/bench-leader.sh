#!/usr/bin/env bash
# bench-leader.sh: the publish rate one events stream's leader takes on a three-node
# JetStream cluster (the soak's, every node syncing before it acknowledges), with the
# stream at one replica and at three, in the same run. See docs/benchmarks.md
# ("A single stream's leader") and docs/capacity.md.
#
# Environment: BENCH_LEADER_MSGS (20000 per round), BENCH_LEADER_ROUNDS (3),
# BENCH_LEADER_BYTES (5000), BENCH_LEADER_WINDOW (256 PubAcks outstanding).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
go test -run '^$' -bench 'BenchmarkStreamLeaderPublish' -benchtime 1x -count 1 -timeout 30m ./tools/soak/ |
  grep -E '^(Benchmark|    leader_bench_test|ok|FAIL|PASS)' | sed 's/^    leader_bench_test.go:[0-9]*: /    /'
