#!/usr/bin/env bash
# Receiver benchmark in the compose and chart layout (docs/benchmarks.md,
# "An external nats-server, against a peer"): a separate nats-server process
# (lazy sync, a fresh temporary store), the receiver and two peers (an
# ingestion agent without signature checks, answering before its PubAck and,
# as it ships, after it), and the agent itself when a binary of it is at
# hand (below), against it, signed ~5 KB deliveries over 32
# loopback connections; prints the rates and the receiver's ratio to each
# peer per round. Bounded: BENCH_ROUNDS x 5 phases (6 with the agent) of BENCH_DURATION,
# 127.0.0.1 only. Extra
# arguments go to the load generator (go run ./tools/loadgen -h).
#
# The nats-server binary is built from the version in go.mod and cached
# outside the repo in ${CRAWLHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crawlhouse}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache=${CRAWLHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crawlhouse}
version=$(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
server="$cache/nats-server-$version"
if [ ! -x "$server" ]; then
  mkdir -p "$cache"
  echo "building nats-server $version into $server" >&2
  CGO_ENABLED=0 go build -o "$server.tmp" github.com/nats-io/nats-server/v2
  mv "$server.tmp" "$server"
fi
# The agent itself (Redpanda Connect) is measured too when a binary of it
# is at hand: BENCH_AGENT, else the one scripts/build-agent.sh leaves in the
# cache. Without one, the peers stand in for it.
agent=${BENCH_AGENT:-$cache/redpanda-connect}
agentflag=()
if [ -x "$agent" ]; then
  agentflag=(-agent "$agent")
elif [ -n "${BENCH_AGENT:-}" ]; then
  echo "BENCH_AGENT=$BENCH_AGENT is not an executable" >&2
  exit 2
fi
mkdir -p bin
go build -o bin/loadgen ./tools/loadgen
bin/loadgen -nats-server "$server" -duration "${BENCH_DURATION:-2s}" -rounds "${BENCH_ROUNDS:-3}" -conns "${BENCH_CONNS:-32}" "${agentflag[@]}" "$@"
