#!/usr/bin/env bash
# make test: every test of every module, against one local ClickHouse shared
# by the whole run (unless CLICKHOUSE_ADDR already answers) and JetStream
# embedded in the test processes. Exits non-zero when any test fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# A fresh data directory: every run starts empty, and stopping it never
# touches a `make run` instance.
data=$(mktemp -d "${TMPDIR:-/tmp}/crawlhouse-test-ch.XXXXXX")
cleanup() {
  scripts/clickhouse.sh stop --data "$data" >/dev/null 2>&1 || true
  rm -rf "$data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

set -a
eval "$(scripts/clickhouse.sh ensure --data "$data")"
set +a
echo "test: ClickHouse at $CLICKHOUSE_ADDR"

status=0
# The web pages' tests drive a real Chromium (internal/testkit/browsertest).
# Without one they are skipped, and under CI=true they fail.
if ! scripts/browser.sh; then
  echo "test: no Chromium could be installed; the browser tests will skip (fail under CI=true)" >&2
  if [ "${CI:-}" = true ]; then status=1; fi
fi
# The export tests read crawlhouse's files with readers other than the
# writers' libraries (npm's warcio and hyparquet, internal/testkit/archivetools)
# and replay them in ReplayWeb.page (npm's replaywebpage, internal/testkit/replaytest).
if ! scripts/archivetools.sh; then
  echo "test: the archive tools could not be installed; the export tests will skip them (fail under CI=true)" >&2
  if [ "${CI:-}" = true ]; then status=1; fi
fi
go vet ./... || status=1
go test -count=1 -timeout 25m ./... || status=1
# A short fuzz of "what the receiver accepts, the sink archives" beyond the
# seeds the line above ran: bounded by executions, not time, so that a busy
# machine runs the same amount (a few seconds of fuzzing once built).
go test -run '^$' -fuzz '^FuzzAcceptedIsArchived$' -fuzztime 10000x -parallel 2 ./internal/archive || status=1
if [ -f deploy/go.mod ]; then
  (cd deploy && go test -count=1 -timeout 15m ./...) || status=1
fi
exit $status
