#!/usr/bin/env bash
# make test: every test of every module, against one shared local ClickHouse
# (unless CLICKHOUSE_ADDR already answers) and JetStream embedded in the test
# processes. Exits non-zero when any test fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

started=""
cleanup() { [ -n "$started" ] && scripts/clickhouse.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM

out=$(scripts/clickhouse.sh ensure)
eval "$out"
export CLICKHOUSE_ADDR CLICKHOUSE_HTTP
[ -n "${CLICKHOUSE_PID:-}" ] && started=1
echo "test: ClickHouse at $CLICKHOUSE_ADDR"

status=0
go vet ./... || status=1
go test -count=1 -timeout 20m ./... || status=1
if [ -f deploy/go.mod ]; then
  (cd deploy && go test -count=1 -timeout 15m ./...) || status=1
fi
exit $status
