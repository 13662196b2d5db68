#!/usr/bin/env bash
# make soak: power losses under load (internal/powerloss), then minutes of
# load with faults and restarts and an exact accounting of every page
# (tools/soak). Flags pass through to the latter, e.g.
#   scripts/soak.sh -pages 5000 -cluster
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Power loss, the long version: several crashes in a row on one JetStream
# store and write-ahead log on lazyfs (FUSE), every acknowledged delivery
# accounted for after each, and the lazily syncing server without the log
# caught losing in every round (internal/powerloss).
CRAWLHOUSE_POWERLOSS_SOAK=1 go test -count=1 -v -timeout 30m ./internal/powerloss
exec go run ./tools/soak -bin bin "$@"
