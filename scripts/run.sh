#!/usr/bin/env bash
# make run: the whole product on this machine, no Docker.
#   local ClickHouse  <- sink (migrations, consumer, backfill, alerts)
#   receiver with embedded JetStream  <- crawlsim (the crawl API: its
#   signed webhooks, and its status endpoints for backfill), which sends
#   1. a crawl of a small site with html in every page, then a recrawl of
#      the same scope with pages edited, one answering 404, one no longer
#      linked and one added: what changed, in the archive and the pages;
#   2. a crawl with dropped, failed and duplicated pages, then a batch
#      scrape with the same faults: backfill and the alert.
# It prints the recrawl's job page and the changed pages' diffs as links,
# what reached ClickHouse, the alert raised and queries to try, then keeps
# everything running until Ctrl-C, which stops it all cleanly (RUN_EXIT=1:
# stops it all once printed, as internal/e2e's TestMakeRun runs it).
# The read API (reader) serves the archive over HTTP; its URL and token are
# printed at the end.
# Ports can be moved with RECEIVER_PORT, SINK_PORT, CRAWLSIM_PORT, NATS_PORT,
# READER_PORT. The reader's token is kept in $VAR/reader-token across runs;
# READER_TOKEN=... sets it, NEW_READER_TOKEN=1 makes a new one. With
# CLICKHOUSE_ADDR and CLICKHOUSE_HTTP set to a running ClickHouse it is used
# instead of the local one, in database CLICKHOUSE_DATABASE (default crawl).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bin=${BIN:-bin}
var=${VAR:-var/run}
receiver_port=${RECEIVER_PORT:-8080}
sink_port=${SINK_PORT:-9090}
crawlsim_port=${CRAWLSIM_PORT:-8090}
nats_port=${NATS_PORT:-4222}
reader_port=${READER_PORT:-8070}
pages=${PAGES:-300}
batch_pages=${BATCH_PAGES:-40}
db=${CLICKHOUSE_DATABASE:-crawl}
secret=demo-webhook-secret
api_key=demo-crawl-api-key
mkdir -p "$var/logs"
# The read API's bearer token, kept across runs so that a browser signed in
# (its cookie) and scripts holding it keep working: READER_TOKEN sets it,
# NEW_READER_TOKEN=1 draws a new one.
token_file=$var/reader-token
if [ -n "${READER_TOKEN:-}" ]; then
  reader_token=$READER_TOKEN
elif [ -s "$token_file" ] && [ "${NEW_READER_TOKEN:-0}" != 1 ]; then
  reader_token=$(cat "$token_file")
else
  reader_token=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
fi
(umask 077 && printf '%s\n' "$reader_token" >"$token_file")

pids=()
stop_all() {
  trap - INT TERM EXIT
  echo
  echo "run: stopping"
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  scripts/clickhouse.sh stop --data "$var/clickhouse" >/dev/null 2>&1 || true
  echo "run: stopped (state kept in $var; rm -rf $var to start afresh)"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# wait_ready NAME URL: NAME's /readyz at URL answers 200 within READY_WAIT
# seconds (default 180; each probe at most 5), else the script stops with
# the readiness answer, which names the check that fails, and NAME's log.
wait_ready() {
  local end=$((SECONDS + ${READY_WAIT:-180}))
  while [ "$SECONDS" -lt "$end" ]; do
    if curl -fsS --max-time 5 -o /dev/null "$2" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "run: $1 did not become ready at $2 in ${READY_WAIT:-180}s; it answers:" >&2
  curl -sS --max-time 5 "$2" >&2 || true
  echo "run: its log, $var/logs/$1.log:" >&2
  tail -n 20 "$var/logs/$1.log" >&2 || true
  exit 1
}

# The binaries, built here so that the wait says what it is: the first
# build compiles every dependency and takes minutes.
echo "run: building receiver, sink, reader and crawlsim into $bin/ (the first build compiles every dependency: minutes)"
build_log=$var/logs/build.log
CGO_ENABLED=0 ${GO:-go} build -v -ldflags "${BUILD_LDFLAGS:-}" -o "$bin/" ./cmd/... >"$build_log" 2>&1 &
pids+=($!)
while kill -0 "${pids[0]}" 2>/dev/null; do
  sleep 5
  # go build -v names each package as it compiles it.
  if kill -0 "${pids[0]}" 2>/dev/null; then echo "run: still building, $(wc -l <"$build_log") packages compiled so far"; fi
done
if ! wait "${pids[0]}"; then
  pids=()
  echo "run: the build failed ($build_log):" >&2
  tail -n 30 "$build_log" >&2
  exit 1
fi
pids=()
echo "run: built"

echo "run: starting ClickHouse (the first run fetches it, ~180 MB)"
set -a
eval "$(scripts/clickhouse.sh ensure --data "$var/clickhouse")"
set +a
ch_http=${CLICKHOUSE_HTTP:?"set CLICKHOUSE_HTTP with CLICKHOUSE_ADDR (the HTTP URL of the same ClickHouse)"}
query() { curl -fsS --max-time 30 "$ch_http/" --data-binary "$1"; }

# The durable fast layout (docs/deployment.md): every delivery is fsynced
# to the write-ahead log, shared by the deliveries waiting at that moment,
# while the embedded JetStream syncs lazily; a 2xx still means it survives a
# power loss (internal/powerloss).
echo "run: starting the receiver on :$receiver_port (embedded JetStream on :$nats_port, write-ahead log in $var/wal)"
RECEIVER_LISTEN=127.0.0.1:$receiver_port WEBHOOK_SECRETS=$secret \
  NATS_EMBEDDED=true NATS_URL=nats://127.0.0.1:$nats_port NATS_STORE_DIR=$var/nats \
  NATS_SYNC_ALWAYS=false RECEIVER_WAL_DIR=$var/wal \
  "$bin/receiver" >"$var/logs/receiver.log" 2>&1 &
pids+=($!)
wait_ready receiver "http://127.0.0.1:$receiver_port/readyz"

echo "run: starting the sink on :$sink_port (backfill from crawlsim on :$crawlsim_port)"
SINK_LISTEN=127.0.0.1:$sink_port NATS_URL=nats://127.0.0.1:$nats_port \
  CLICKHOUSE_ADDR=$CLICKHOUSE_ADDR CLICKHOUSE_DATABASE=$db \
  CRAWL_API_URL=http://127.0.0.1:$crawlsim_port CRAWL_API_KEY=$api_key \
  BACKFILL_QUIET_PERIOD=10s ALERT_FAILURE_THRESHOLD=5 SINK_BATCH_WAIT=500ms \
  "$bin/sink" >"$var/logs/sink.log" 2>&1 &
pids+=($!)
wait_ready sink "http://127.0.0.1:$sink_port/readyz"

echo "run: starting the read API on :$reader_port"
READER_LISTEN=127.0.0.1:$reader_port READER_TOKENS=$reader_token READER_CURSOR_KEY=run-local-cursor-key-0001 \
  CLICKHOUSE_ADDR=$CLICKHOUSE_ADDR CLICKHOUSE_DATABASE=$db CLICKHOUSE_HTTP_URL=$ch_http READER_FEED_SETTLE=1s \
  "$bin/reader" >"$var/logs/reader.log" 2>&1 &
pids+=($!)
wait_ready reader "http://127.0.0.1:$reader_port/readyz"
ui=http://127.0.0.1:$reader_port/ui

# 1. What changed. A small site, html in every page, crawled and then
# recrawled in one scope (named in the webhook metadata with a limit the
# crawl never reaches, so the recrawl is complete and a page it no longer
# finds is removed). Fixed ids and seed: a second `make run` sends the same
# jobs again, which the archive keeps as they were.
site_crawl=0193c000-0000-7000-8000-00000000de01
site_recrawl=0193c000-0000-7000-8000-00000000de02
site_pages=12
site_args=(-site https://docs.example.org -seed 41 -pages "$site_pages" -page-bytes 900 -html
  -metadata '{"scope":"demo-site","limit":"100"}' -rate 200 -retry-delays 2s,5s)

# site_job ID LOG [ARGS...]: crawlsim sends the site's job and serves the
# crawl API until the sink's backfill has read the job to its end.
site_job() {
  local id=$1 log=$2 pid
  shift 2
  WEBHOOK_SECRET=$secret CRAWL_API_KEY=$api_key "$bin/crawlsim" \
    -listen 127.0.0.1:$crawlsim_port -target "http://127.0.0.1:$receiver_port/webhooks/crawl" \
    -crawl-id "$id" "${site_args[@]}" "$@" >"$log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 600); do
    [ "$(query "SELECT count() FROM $db.crawls WHERE crawl_id = '$id' AND backfill_state = 'done'")" -ge 1 ] && break
    sleep 0.2
  done
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || true
  unset 'pids[-1]'
  [ "$(query "SELECT count() FROM $db.crawls WHERE crawl_id = '$id' AND backfill_state = 'done'")" -ge 1 ] ||
    { echo "run: the backfill of job $id did not end; see $log and $var/logs/sink.log" >&2; exit 1; }
}

# classes: the recrawl's URLs by class, from the archive's versions and removals.
classes="SELECT url, change FROM $db.page_changes WHERE crawl_id = '$site_recrawl' UNION ALL SELECT url, change FROM $db.page_removals WHERE crawl_id = '$site_recrawl'"

echo "run: crawlsim crawls a $site_pages-page site (job $site_crawl), then recrawls it (job $site_recrawl): 2 pages edited, 1 reordered, 1 answering 404, 1 no longer linked, 1 added"
site_job "$site_crawl" "$var/logs/crawlsim-site.log"
site_job "$site_recrawl" "$var/logs/crawlsim-recrawl.log" -recrawl-of "$site_crawl" \
  -recrawl-edited 2 -recrawl-reordered 1 -recrawl-not-found 1 -recrawl-gone 1 -recrawl-added 1
# Every URL the recrawl found or lost: the kept and added ones, the gone one.
for _ in $(seq 1 300); do
  [ "$(query "SELECT uniqExact(url) FROM ($classes)")" -ge $((site_pages + 1)) ] && break
  sleep 0.2
done
# The changed pages' diffs, the removed and new pages' histories.
page_links=$(query "SELECT if(change = 'changed', concat('  diff     $ui/diff?url=', encodeURLComponent(url), '&from=$site_crawl&to=$site_recrawl'), concat('  ', rpad(change, 8, ' '), ' $ui/page?url=', encodeURLComponent(url))) FROM ($classes) WHERE change != 'same' GROUP BY url, change ORDER BY change, url FORMAT TSVRaw")

echo "run: crawlsim sends a crawl of $pages pages, then a batch scrape of $batch_pages (8% dropped, 4% failed, 5% duplicated, 2% badly signed)"
WEBHOOK_SECRET=$secret CRAWL_API_KEY=$api_key "$bin/crawlsim" \
  -listen 127.0.0.1:$crawlsim_port -target "http://127.0.0.1:$receiver_port/webhooks/crawl" \
  -pages "$pages" -batch-pages "$batch_pages" -drops 0.08 -failures 0.04 -duplicates 0.05 -bad-signatures 0.02 \
  -rate 200 -retry-delays 2s,5s -manifest "$var/manifest.json" \
  >"$var/logs/crawlsim.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 900); do
  [ "$(grep -c '^manifest:' "$var/logs/crawlsim.log" 2>/dev/null)" -ge 2 ] && break
  sleep 0.2
done
sed -n '/^\(crawl\|batch scrape\) /,/^successful pages only/p' "$var/logs/crawlsim.log"
crawl=$(sed -n 's/^crawl \([0-9a-f-]*\) .*/\1/p' "$var/logs/crawlsim.log" | head -n 1)
batch=$(sed -n 's/^batch scrape \([0-9a-f-]*\) .*/\1/p' "$var/logs/crawlsim.log" | head -n 1)
[ -n "$crawl" ] && [ -n "$batch" ] || { echo "run: crawlsim did not send both jobs; see $var/logs/crawlsim.log" >&2; exit 1; }
want=$(sed -n 's/^pages: [0-9]* (\([0-9]*\) successful.*/\1/p' "$var/logs/crawlsim.log" | awk '{s += $1} END {print s}')

echo "run: waiting for the archive (webhooks now, backfill once each job completed)"
for _ in $(seq 1 120); do
  got=$(query "SELECT count() FROM $db.pages FINAL WHERE crawl_id IN ('$crawl', '$batch') AND success")
  [ "$got" -ge "$want" ] && break
  sleep 1
done

echo
echo "== ClickHouse, crawl $crawl and batch scrape $batch"
query "SELECT job_kind, origin, countIf(success) AS successful_pages, countIf(NOT success) AS failed_pages FROM $db.pages FINAL WHERE crawl_id IN ('$crawl', '$batch') GROUP BY job_kind, origin ORDER BY job_kind, origin FORMAT PrettyCompactMonoBlock"
query "SELECT job_kind, uniqExact(url) AS failed_urls, any(error) AS example FROM $db.failures WHERE crawl_id IN ('$crawl', '$batch') AND reason != 'cancelled' GROUP BY job_kind ORDER BY job_kind FORMAT PrettyCompactMonoBlock"
query "SELECT kind, crawl_id, pages_received, pages_backfilled, failures, last_event, backfill_state FROM $db.crawls WHERE crawl_id IN ('$crawl', '$batch') ORDER BY kind FORMAT PrettyCompactMonoBlock"
echo "successful pages expected (both jobs): $want"
echo
echo "== alert raised by the sink"
grep '"alert: crawl page failures' "$var/logs/sink.log" | head -n 2 || echo "(none)"
echo
echo "== what changed: the recrawl's classes (docs/search.md#what-changed-change-tracking)"
query "SELECT change, count() AS pages, arrayStringConcat(arraySort(groupArray(url)), ' ') AS urls FROM (SELECT DISTINCT url, change FROM ($classes)) GROUP BY change ORDER BY change FORMAT PrettyCompactMonoBlock"
cat <<EOF

== the archive in a browser (docs/web.md); sign in by pasting the token into the form: $reader_token
  the recrawl, its changes: $ui/jobs/$site_recrawl
$page_links
  the crawl with faults:    $ui/jobs/$crawl

== the read API: http://127.0.0.1:$reader_port  (token: $reader_token; docs/read-api.md)
  curl -s -H 'Authorization: Bearer $reader_token' 'http://127.0.0.1:$reader_port/v1/search?job=$site_recrawl&change=changed'
  curl -s -H 'Authorization: Bearer $reader_token' 'http://127.0.0.1:$reader_port/v1/search?q=crawl&limit=5'
  curl -s -H 'Authorization: Bearer $reader_token' http://127.0.0.1:$reader_port/v1/jobs/$crawl
  curl -s -H 'Authorization: Bearer $reader_token' 'http://127.0.0.1:$reader_port/v1/jobs/$crawl/export?format=warc' -o crawl.warc
  curl -s http://127.0.0.1:$reader_port/openapi.json

== try it
  curl -s $ch_http/ --data-binary "SELECT url, title FROM $db.pages FINAL WHERE hasToken(markdown, 'crawl') LIMIT 5"
  curl -s http://127.0.0.1:$receiver_port/metrics | grep crawlhouse_
  curl -s http://127.0.0.1:$sink_port/metrics | grep crawlhouse_
  logs: $var/logs/   manifest of what was sent: $var/manifest.json
EOF
if [ "${RUN_EXIT:-0}" = 1 ]; then exit 0; fi
echo "Everything keeps running; Ctrl-C stops it."
wait "${pids[0]}"
