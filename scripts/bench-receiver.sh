#!/usr/bin/env bash
# Receiver benchmark (docs/benchmarks.md, "Receiver"): signed ~5 KB
# crawl.page deliveries posted over loopback to a receiver with an embedded
# JetStream, beside the ceiling (raw async JetStream publishes of the same
# payloads to the same server) measured in the same run, for a server that
# syncs always and one with the default lazy sync; rounds of every phase,
# summed up by their medians; then the durable fast layout (write-ahead
# log + lazy server) against the fsync ceiling and the lazy receiver.
# Bounded: BENCH_ROUNDS x 6 phases of BENCH_DURATION per line, 127.0.0.1
# only. Extra arguments go to the load
# generator (go run ./tools/loadgen -h).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p bin
go build -o bin/loadgen ./tools/loadgen
args=(-duration "${BENCH_DURATION:-2s}" -rounds "${BENCH_ROUNDS:-3}" -conns "${BENCH_CONNS:-32}")
# The receiver's defaults (RECEIVER_GROUP_COMMIT=auto): group commit on for
# the embedded server that syncs always, off for the lazy one.
bin/loadgen "${args[@]}" -sync always,lazy -group-commit auto "$@"
# For comparison: single publishes on the server that syncs always.
bin/loadgen "${args[@]}" -sync always -group-commit false -half=false "$@"
# The durable fast layout (RECEIVER_WAL_DIR, lazy server) against its
# targets: at 32 and 128 connections against the per-write fsync ceiling of
# the same round, at 128 against the lazy receiver, and both half-peak p99s.
bin/loadgen -duration "${BENCH_DURATION:-2s}" -rounds "${BENCH_ROUNDS:-3}" -durable -durable-conns "${BENCH_DURABLE_CONNS:-32,128}" "$@"
