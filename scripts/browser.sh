#!/usr/bin/env bash
# Installs the browser the web page's tests drive: Debian's chromium package.
# Idempotent: does nothing when /usr/bin/chromium is already there. Needs root
# (or sudo) and apt; elsewhere it says what to install and fails, so that a CI
# run (CI=true) does not go on to skip the browser tests silently.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "browser.sh: no apt-get here; install Chromium and put it at /usr/bin/chromium (or set CHROMIUM_PATH)" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "browser.sh: installing chromium needs root: run 'apt-get install -y chromium' as root" >&2
    exit 1
  fi
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends chromium
test -x /usr/bin/chromium
