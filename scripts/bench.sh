#!/usr/bin/env bash
# make bench: every benchmark, each printing its figures beside a ceiling
# measured in the same run (this machine is shared and noisy: only ratios
# within one run compare).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
status=0
for b in scripts/bench-*.sh; do
  [ -x "$b" ] || continue
  echo "== $b"
  "$b" || status=1
done
exit $status
