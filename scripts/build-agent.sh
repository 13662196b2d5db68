#!/usr/bin/env bash
# Builds the ingestion agent the receiver is measured against, Redpanda
# Connect with the components of its ingestion path (the http_server input,
# the nats_jetstream output, the core processors), into the cache, for
# scripts/bench-external.sh (docs/benchmarks.md, "The agent itself").
#
# The Go module proxy answers 403 for github.com/redpanda-data/benthos/v4 and
# github.com/redpanda-data/connect/v4, so their sources are given as two
# directories whose versions agree (connect's go.mod names the benthos
# version it needs):
#
#   scripts/build-agent.sh BENTHOS_SRC CONNECT_SRC
#
# Every other module comes from the proxy. With an official binary
# (redpanda-connect from the project's releases) skip this and set
# BENCH_AGENT to it instead.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BENTHOS_SRC CONNECT_SRC" >&2; exit 2; }
benthos=$(cd "$1" && pwd)
connect=$(cd "$2" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CRAWLHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crawlhouse}
out="$cache/redpanda-connect"
want=$(awk '$1 == "github.com/redpanda-data/benthos/v4" { print $2 }' "$connect/go.mod")
have=$(awk '$1 == "module" { print $2 }' "$benthos/go.mod")
[ "$have" = "github.com/redpanda-data/benthos/v4" ] || { echo "$benthos is not github.com/redpanda-data/benthos/v4" >&2; exit 2; }
[ -n "$want" ] || { echo "$connect/go.mod does not require github.com/redpanda-data/benthos/v4" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/main.go" <<'GO'
// Redpanda Connect with the components of the ingestion path.
package main

import (
	"context"

	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	_ "github.com/redpanda-data/connect/v4/public/components/nats"
)

func main() { service.RunCLI(context.Background()) }
GO
{
  echo "module agent"
  echo
  echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
  echo
  echo "require ("
  echo "	github.com/redpanda-data/benthos/v4 $want"
  echo "	github.com/redpanda-data/connect/v4 v4.0.0"
  echo ")"
  echo
  echo "replace github.com/redpanda-data/benthos/v4 => $benthos"
  echo "replace github.com/redpanda-data/connect/v4 => $connect"
  # connect's own replacements hold only in its module: repeat them here.
  grep -E '^replace [^ ]+ => ' "$connect/go.mod" || true
} > "$work/go.mod"
mkdir -p "$cache"
(cd "$work" && GOFLAGS=-mod=mod go mod tidy && CGO_ENABLED=0 go build -o "$out.tmp" .)
mv "$out.tmp" "$out"
echo "$out: $("$out" --version | head -1) (benthos $want, connect from $connect)"
