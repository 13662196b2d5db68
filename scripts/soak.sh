#!/usr/bin/env bash
# make soak: minutes of load with faults and restarts, then an exact
# accounting of every page (internal/soak). Flags pass through, e.g.
#   scripts/soak.sh -pages 5000 -cluster
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
exec go run ./cmd/soak -bin bin "$@"
