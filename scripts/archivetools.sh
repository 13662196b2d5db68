#!/usr/bin/env bash
# Installs the archive tools the export tests read crawlhouse's files with
# (webrecorder's warcio for WARC, hyparquet for Parquet: readers other than
# the libraries that write them; webrecorder's ReplayWeb.page, whose ui.js
# and sw.js the replay tests serve to Chromium; the crawl API's own diff and
# parse-diff, which the change-tracking diff is compared with) from the npm registry,
# pinned by scripts/archivetools/package.json, into var/archivetools.
# Idempotent. ReplayWeb.page's ui.js and sw.js are prebuilt bundles; its
# npm dependencies are not used by them, and the override of
# @webrecorder/wabac only lets the install resolve (the newest wabac asks
# for a warcio the registry does not have).
# Needs node and npm (Debian's nodejs and npm packages); without them it
# says so and fails, so that a CI run (CI=true) does not go on to skip the
# tests silently.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=var/archivetools
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm
  else
    echo "archivetools.sh: no node/npm here; install Debian's nodejs and npm packages" >&2
    exit 1
  fi
fi
mkdir -p "$dir"
if cmp -s scripts/archivetools/package.json "$dir/package.json" && [ -d "$dir/node_modules/warcio" ] && [ -d "$dir/node_modules/hyparquet" ] \
  && [ -d "$dir/node_modules/replaywebpage" ] && [ -d "$dir/node_modules/diff" ] && [ -d "$dir/node_modules/parse-diff" ]; then
  exit 0
fi
cp scripts/archivetools/package.json "$dir/package.json"
(cd "$dir" && npm install --no-audit --no-fund --omit=dev)
