#!/usr/bin/env bash
# shellcheck disable=SC2016 # the bash -c snippets expand their own positional args
# clickhouse.sh: a real ClickHouse on loopback for `make run`, `make test` and CI,
# without Docker or a ClickHouse server package.
#
# The engine is libchdb.so from the npm package @chdb/lib-linux-x64-gnu (ClickHouse as
# a shared library), run as clickhouse-local serving the native and HTTP protocols by
# tools/clickhouse-local/launcher.c. Both are cached outside the repo in
#   ${CRAWLHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crawlhouse}
#
# Usage:
#   scripts/clickhouse.sh ensure [--data DIR] [--tcp-port N] [--http-port N] [--watch-stdin]
#                                [--config-file FILE]
#   scripts/clickhouse.sh stop   [--data DIR] [--timeout SECONDS]
#   scripts/clickhouse.sh status [--data DIR]
#   scripts/clickhouse.sh fetch           # only download the engine and build the launcher
#
# ensure prints eval-able lines on stdout (everything else goes to stderr):
#   CLICKHOUSE_ADDR=127.0.0.1:PORT      native protocol (clickhouse-go)
#   CLICKHOUSE_HTTP=http://127.0.0.1:PORT
#   CLICKHOUSE_PID=PID                  the launcher; absent when an existing server is used
# If CLICKHOUSE_ADDR is set and answers the native protocol, only it is printed and
# nothing is started. Otherwise a server is started for the instance directory DIR
# (default $CACHE/instance), or the one already running there is reused. DIR holds
#   clickhouse/        the ClickHouse data (persists across stop/ensure)
#   clickhouse.pid     the launcher's pid       clickhouse.env   the printed lines
#   launcher.log       launcher stderr          server.log       ClickHouse warnings/errors
# stop and status act only on the instance recorded in DIR. --watch-stdin ties the
# server's life to ensure's stdin: it stops gracefully when that reaches EOF (the test
# helper passes a pipe, so a crashed test binary leaves no server behind).
# --config-file hands clickhouse-local a server configuration (XML or YAML), e.g. the
# remote_servers and macros that make several instances one sharded cluster for the
# Distributed engine (internal/clickhousetest.StartCluster writes them). Use fixed
# --tcp-port values then: the configuration names every node by its native port.
#
# Environment: CLICKHOUSE_MAX_MEMORY (bytes, default 4294967296), CLICKHOUSE_LOG_LEVEL
# (default warning), CLICKHOUSE_START_TIMEOUT (seconds, default 60).
# The advertised native port is a relay in the launcher in front of clickhouse-local's own
# (see launcher.c: in 26.7 a client's connection reset would otherwise abort the server).
set -euo pipefail

readonly CHDB_NPM_PACKAGE="@chdb/lib-linux-x64-gnu"
readonly CHDB_VERSION="26.7.3-stable.1"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
launcher_src="$repo_root/tools/clickhouse-local/launcher.c"
cache="${CRAWLHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crawlhouse}"
chdb_dir="$cache/chdb-$CHDB_VERSION"
libchdb="$chdb_dir/libchdb.so"

log() { printf 'clickhouse.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# native_answers HOST:PORT: true when a ClickHouse native-protocol server answers a
# client Hello there, with a ServerHello (0) or an Exception (2, e.g. bad password).
# Needs only bash's /dev/tcp and coreutils.
native_answers() {
	local host="${1%:*}" port="${1##*:}"
	[[ -n "$host" && "$port" =~ ^[0-9]+$ ]] || return 1
	local first
	# Hello: packet 0, client name "crawlhouse", version 1.0, revision 54460 (varint),
	# database "", user "default", password "".
	first="$(timeout 5 bash -c '
		exec 3<>"/dev/tcp/$1/$2" || exit 1
		printf "\x00\x0acrawlhouse\x01\x00\xbc\xa9\x03\x00\x07default\x00" >&3
		dd bs=4096 count=1 <&3 2>/dev/null | od -An -tu1 -N1' _ "$host" "$port" 2>/dev/null)" || return 1
	first="${first//[[:space:]]/}"
	[[ "$first" == 0 || "$first" == 2 ]]
}

# http_ping PORT: true when GET /ping on 127.0.0.1:PORT answers "Ok.".
http_ping() {
	timeout 5 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "GET /ping HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
		grep -q "^Ok\." <&3' _ "$1" 2>/dev/null
}

# port_free PORT: nothing accepts connections on 127.0.0.1:PORT.
port_free() {
	! timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

pick_port() {
	local p _
	for _ in $(seq 1 50); do
		# Below the kernel's ephemeral range (32768-60999 by default), so an
		# outgoing connection cannot take the port between pick and bind.
		p=$((12000 + (RANDOM * 32768 + RANDOM) % 20000))
		if port_free "$p"; then
			echo "$p"
			return 0
		fi
	done
	die "no free loopback port found"
}

# fetch_engine: download and unpack libchdb.so once. Concurrent callers serialize on a
# lock; the unpacked directory appears by an atomic rename, so a reader never sees a
# partial library.
fetch_engine() {
	[[ -s "$libchdb" ]] && return 0
	mkdir -p "$cache"
	exec {lockfd}>"$cache/.fetch.lock"
	flock "$lockfd"
	if [[ ! -s "$libchdb" ]]; then
		command -v npm >/dev/null || die "npm is needed to fetch $CHDB_NPM_PACKAGE (apt-get install npm), or set CLICKHOUSE_ADDR to a running ClickHouse"
		local tmp start
		tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
		# shellcheck disable=SC2064
		trap "rm -rf '$tmp'" EXIT
		start=$SECONDS
		log "fetching $CHDB_NPM_PACKAGE@$CHDB_VERSION (~180 MB, once) into $cache"
		local tgz
		tgz="$(cd "$tmp" && npm pack --silent --cache "$tmp/npm-cache" "$CHDB_NPM_PACKAGE@$CHDB_VERSION" | tail -n 1)" ||
			die "npm pack $CHDB_NPM_PACKAGE@$CHDB_VERSION failed"
		[[ -s "$tmp/$tgz" ]] || die "npm pack produced no tarball"
		tar -xzf "$tmp/$tgz" -C "$tmp" package/libchdb.so package/package.json ||
			die "unpacking $tgz failed"
		rm -rf "${tmp:?}/npm-cache" "${tmp:?}/$tgz"
		mv -T "$tmp/package" "$chdb_dir" 2>/dev/null || [[ -s "$libchdb" ]] ||
			die "could not install $chdb_dir"
		rm -rf "$tmp"
		trap - EXIT
		log "fetched in $((SECONDS - start)) s"
	fi
	exec {lockfd}>&-
}

# build_launcher: compile the launcher into the cache, keyed by the source's hash, and
# print its path.
build_launcher() {
	[[ -f "$launcher_src" ]] || die "missing $launcher_src"
	local sum bin
	sum="$(sha256sum "$launcher_src" | cut -c1-16)"
	bin="$cache/bin/clickhouse-launcher-$sum"
	if [[ ! -x "$bin" ]]; then
		local cc="${CC:-}"
		if [[ -z "$cc" ]]; then
			for cc in gcc cc clang ""; do command -v "$cc" >/dev/null 2>&1 && break; done
		fi
		[[ -n "$cc" ]] || die "a C compiler (gcc) is needed to build the launcher (apt-get install gcc)"
		mkdir -p "$cache/bin"
		"$cc" -O2 -Wall -pthread -o "$bin.tmp.$$" "$launcher_src" -ldl >&2 || die "compiling $launcher_src failed"
		mv -f "$bin.tmp.$$" "$bin"
	fi
	echo "$bin"
}

# pid_alive PIDFILE: prints the pid when it names a running launcher of this instance.
pid_alive() {
	local pidfile="$1" pid
	[[ -s "$pidfile" ]] || return 1
	pid="$(<"$pidfile")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# Guard against a recycled pid: the command line must be our launcher on our data dir.
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--path=$datadir/" || return 1
	echo "$pid"
}

instance_dir=""
tcp_port=""
http_port=""
watch_stdin=0
stop_timeout=30
config_file=""

parse_args() {
	while (($#)); do
		case "$1" in
		--data) instance_dir="${2:?--data needs a directory}"; shift 2 ;;
		--data=*) instance_dir="${1#*=}"; shift ;;
		--tcp-port) tcp_port="${2:?}"; shift 2 ;;
		--http-port) http_port="${2:?}"; shift 2 ;;
		--watch-stdin) watch_stdin=1; shift ;;
		--timeout) stop_timeout="${2:?}"; shift 2 ;;
		--config-file) config_file="${2:?--config-file needs a file}"; shift 2 ;;
		--config-file=*) config_file="${1#*=}"; shift ;;
		*) die "unknown argument: $1" ;;
		esac
	done
	instance_dir="${instance_dir:-$cache/instance}"
	mkdir -p "$instance_dir"
	instance_dir="$(cd "$instance_dir" && pwd)"
	datadir="$instance_dir/clickhouse"
	pidfile="$instance_dir/clickhouse.pid"
	envfile="$instance_dir/clickhouse.env"
	launcher_log="$instance_dir/launcher.log"
	server_log="$instance_dir/server.log"
	if [[ -n "$config_file" ]]; then
		[[ -r "$config_file" ]] || die "--config-file $config_file is not a readable file"
		config_file="$(cd "$(dirname "$config_file")" && pwd)/$(basename "$config_file")"
	fi
}

cmd_ensure() {
	parse_args "$@"
	if [[ -n "${CLICKHOUSE_ADDR:-}" ]]; then
		local addr="${CLICKHOUSE_ADDR%%,*}"
		if native_answers "$addr"; then
			echo "CLICKHOUSE_ADDR=$CLICKHOUSE_ADDR"
			return 0
		fi
		log "CLICKHOUSE_ADDR=$CLICKHOUSE_ADDR does not answer the native protocol; starting a local ClickHouse"
	fi

	exec {instlock}>"$instance_dir/.lock"
	flock "$instlock"
	if pid_alive "$pidfile" >/dev/null && [[ -s "$envfile" ]]; then
		local addr; addr="$(sed -n 's/^CLICKHOUSE_ADDR=//p' "$envfile")"
		if native_answers "$addr"; then
			log "reusing the ClickHouse already running for $instance_dir"
			cat "$envfile"
			return 0
		fi
	fi

	fetch_engine
	local launcher
	launcher="$(build_launcher)"
	mkdir -p "$datadir"

	local pid deadline start_ns
	local keepalive="SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; SELECT count() FROM file('/dev/stdin', 'LineAsString') FORMAT Null"
	for _ in 1 2 3 4 5; do
		# tcp is the advertised native port, served by the launcher's relay (see
		# launcher.c: it keeps a client's connection reset from aborting the
		# server); clickhouse-local itself listens on the internal port.
		local tcp="${tcp_port:-$(pick_port)}" http="${http_port:-$(pick_port)}" internal
		internal="$(pick_port)"
		[[ "$tcp" != "$http" && "$internal" != "$tcp" && "$internal" != "$http" ]] || continue
		: >"$launcher_log"
		: >"$server_log"
		start_ns="$(date +%s%N)"
		# The launcher's stdin is /dev/null (EOF at once, so it is ignored) unless
		# --watch-stdin hands it ours. Its stdout/stderr go to the log so that callers
		# reading our stdout ($(...)) are not held open.
		local -a cmd=(
			"$launcher" "--lib=$libchdb" "--relay=$tcp:$internal"
			"$([[ $watch_stdin == 1 ]] && echo --stop-on-stdin-eof || echo --)"
			"--path=$datadir/" "--tcp_port=$internal" "--http_port=$http" "--listen_host=127.0.0.1"
			${config_file:+"--config-file=$config_file"}
			"--log-level=${CLICKHOUSE_LOG_LEVEL:-warning}" --query "$keepalive"
			-- "--logger.log=$server_log"
			"--max_server_memory_usage=${CLICKHOUSE_MAX_MEMORY:-4294967296}"
			--background_schedule_pool_size=32 --background_pool_size=4
		)
		if [[ $watch_stdin == 1 ]]; then
			exec {stdin_copy}<&0
			"${cmd[@]}" <&"$stdin_copy" >>"$launcher_log" 2>&1 {instlock}>&- &
			exec {stdin_copy}<&-
		else
			"${cmd[@]}" </dev/null >>"$launcher_log" 2>&1 {instlock}>&- &
		fi
		pid=$!
		echo "$pid" >"$pidfile"

		deadline=$((SECONDS + ${CLICKHOUSE_START_TIMEOUT:-60}))
		while :; do
			if ! kill -0 "$pid" 2>/dev/null; then
				# A clash on a port picked here is retried with new picks; one on a
				# port the caller fixed fails all five tries and is reported.
				if grep -q "Address already in use" "$launcher_log" "$server_log" 2>/dev/null; then
					log "port clash on $tcp/$http, retrying"
					continue 2
				fi
				rm -f "$pidfile"
				log "ClickHouse exited during start-up; last lines of $launcher_log and $server_log:"
				tail -n 20 "$launcher_log" "$server_log" >&2 2>/dev/null || true
				exit 1
			fi
			if http_ping "$http" && native_answers "127.0.0.1:$tcp"; then
				break
			fi
			if ((SECONDS >= deadline)); then
				log "ClickHouse did not answer on 127.0.0.1:$tcp within ${CLICKHOUSE_START_TIMEOUT:-60} s; stopping it. Last lines of its logs:"
				tail -n 20 "$launcher_log" "$server_log" >&2 2>/dev/null || true
				kill -TERM "$pid" 2>/dev/null || true
				rm -f "$pidfile"
				exit 1
			fi
			sleep 0.1
		done
		printf 'CLICKHOUSE_ADDR=127.0.0.1:%s\nCLICKHOUSE_HTTP=http://127.0.0.1:%s\nCLICKHOUSE_PID=%s\n' \
			"$tcp" "$http" "$pid" >"$envfile"
		log "ClickHouse up on 127.0.0.1:$tcp (http $http, pid $pid) in $((($(date +%s%N) - start_ns) / 1000000)) ms; data $datadir"
		cat "$envfile"
		return 0
	done
	die "could not start ClickHouse after 5 attempts; see $launcher_log"
}

cmd_stop() {
	parse_args "$@"
	local pid
	if ! pid="$(pid_alive "$pidfile")"; then
		log "no ClickHouse running for $instance_dir"
		rm -f "$pidfile" "$envfile"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + stop_timeout))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "ClickHouse (pid $pid) still running after ${stop_timeout} s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	rm -f "$pidfile" "$envfile"
	log "stopped ClickHouse (pid $pid)"
}

cmd_status() {
	parse_args "$@"
	local pid
	if pid="$(pid_alive "$pidfile")" && [[ -s "$envfile" ]]; then
		local addr; addr="$(sed -n 's/^CLICKHOUSE_ADDR=//p' "$envfile")"
		if native_answers "$addr"; then
			cat "$envfile"
			return 0
		fi
		log "launcher pid $pid is running but $addr does not answer"
		return 1
	fi
	log "no ClickHouse running for $instance_dir"
	return 3
}

case "${1:-}" in
ensure) shift; cmd_ensure "$@" ;;
stop) shift; cmd_stop "$@" ;;
status) shift; cmd_status "$@" ;;
fetch) shift; fetch_engine; build_launcher >/dev/null ;;
*)
	sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
