#!/usr/bin/env bash
# Redis's own Tcl test suite against the leader of a 3-replica apus Redis
# cluster (issue 32): after every unit, each replica must hold the same
# data as the leader and none may have been restarted.
#
#   scripts/redis-suite.sh [OPTIONS] [UNIT...] [-- RUNTEST-ARGS...]
#
#   UNIT            a unit of Redis's suite (tests/<UNIT>.tcl), e.g.
#                   unit/type/hash; run after the default ones
#                   (unit/type/stream unit/other unit/latency-monitor)
#   --only-units    run only the UNITs given, not the default ones
#   --src DIR       where the suite's source is cached (default
#                   $APUS_REDIS_SRC or /var/cache/apus/redis-src); fetched
#                   from deb.debian.org (apt-get source, through a private
#                   sources list) when absent
#   --port P        the leader's app port (default 20701; the replicas
#                   get P+1 and P+2)
#   --timeout S     seconds each unit may run (default 1800)
#   --keep          leave the cluster running and its work dir in place
#   -- ARGS         more arguments for runtest, e.g. -- --tags -slow
#
# Each unit runs as `./runtest --host 127.0.0.1 --port P --single UNIT
# --clients 1` (external-server mode: tests tagged external:skip are
# skipped by the suite).  The cluster is apps/redis/cluster-shm.conf as
# shipped (guard on, BGSAVE snapshots, seed_function) on its own ports and
# work dir (/tmp/apus-redis-suite-XXXXXX).  After a unit: waits until every
# node has applied the leader's commit, compares DEBUG DIGEST read over each
# node's admin socket (<data_dir>/redis.sock, not replicated), checks that
# no node's pid changed and that no guard log (apus.guard.log) reports a
# restart, restore or rebuild, and counts new divergence records (apus
# status --json; replies that differ, e.g. INFO's, are recorded too) and
# whether the leader changed (a failover drops the suite's connection).  One
# line per unit; exit status 1 if a unit's digests differ, a node was
# restarted or the leader changed, 2 on a usage error, 3 if the suite or
# the cluster could not be set up.  runtest's output, each line stamped with
# the time (to match <data_dir>/apus.log), is kept in the work dir
# (<unit>.out).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { echo "redis-suite: $*" >&2; exit 3; }
bad() { echo "redis-suite: $*" >&2; echo "usage: scripts/redis-suite.sh [--only-units] [--src DIR] [--port P] [--timeout S] [--keep] [UNIT...] [-- RUNTEST-ARGS...]" >&2; exit 2; }

defaults=(unit/type/stream unit/other unit/latency-monitor)
units=() extra=() only=0 keep=0
src=${APUS_REDIS_SRC:-/var/cache/apus/redis-src}
port=20701 timeout=1800
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--only-units) only=1 ;;
	--keep) keep=1 ;;
	--src) [ $# -ge 2 ] || bad "--src needs a directory"; src=$2; shift ;;
	--port) [[ ${2:-} =~ ^[1-9][0-9]{2,4}$ && $2 -le 65000 ]] || bad "--port needs a port number (<= 65000)"; port=$2; shift ;;
	--timeout) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || bad "--timeout needs seconds"; timeout=$2; shift ;;
	--) shift; extra=("$@"); break ;;
	-*) bad "unknown option '$1'" ;;
	*) [[ $1 =~ ^[A-Za-z0-9_/-]+$ ]] || bad "bad unit name '$1'"; units+=("$1") ;;
	esac
	shift
done
[ "$only" = 1 ] && [ ${#units[@]} -eq 0 ] && bad "--only-units needs a UNIT"
[ "$only" = 1 ] || units=("${defaults[@]}" "${units[@]}")

for c in redis-server redis-cli tclsh jq; do
	command -v "$c" >/dev/null || die "$c is not installed (scripts/install-deps.sh)"
done
apus=build/bin/apus
[ -x "$apus" ] || die "$apus is missing: build apus first (make)"

# --- the suite: Debian's source of the installed redis-server -------------
ver=$(dpkg-query -W -f '${Version}' redis-server 2>/dev/null) ||
	die "redis-server is not a Debian package here: cannot tell which source to fetch"
want=$(redis-server --version | sed -n 's/.* v=\([0-9.]*\) .*/\1/p')
suite=$src/redis-$ver
if [ ! -f "$suite/tests/test_helper.tcl" ]; then
	command -v dpkg-source >/dev/null || die "dpkg-source is missing (apt-get install dpkg-dev)"
	echo "redis-suite: fetching Debian's redis $ver source into $suite"
	mkdir -p "$src" || die "cannot create $src (use --src DIR)"
	tmp=$(mktemp -d "$src/.fetch-XXXXXX")
	chmod 755 "$tmp"
	mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
	kr=/usr/share/keyrings/debian-archive-keyring.gpg
	{
		echo "deb-src [signed-by=$kr] http://deb.debian.org/debian-security bookworm-security main"
		echo "deb-src [signed-by=$kr] http://deb.debian.org/debian bookworm main"
		echo "deb-src [signed-by=$kr] http://deb.debian.org/debian bookworm-updates main"
	} >"$tmp/src.list"
	aopt=(-q -o "Dir::Etc::SourceList=$tmp/src.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache")
	(cd "$tmp" && timeout 300 apt-get "${aopt[@]}" update >apt.out 2>&1 &&
		timeout 300 apt-get "${aopt[@]}" source --download-only "redis=$ver" >>apt.out 2>&1) ||
		{ tail -5 "$tmp/apt.out" >&2; rm -rf "$tmp"; die "apt-get source redis=$ver failed"; }
	(cd "$tmp" && dpkg-source -x ./*.dsc redis >>apt.out 2>&1) ||
		{ tail -5 "$tmp/apt.out" >&2; rm -rf "$tmp"; die "dpkg-source -x failed"; }
	rm -rf "$suite"
	mv "$tmp/redis" "$suite"
	rm -rf "$tmp"
fi
# The suite runs src/redis-cli (and src/redis-server for nested servers,
# which external mode avoids): the installed ones.
for b in redis-server redis-cli redis-benchmark; do
	[ -e "$suite/src/$b" ] || ln -s "$(command -v $b || echo /usr/bin/$b)" "$suite/src/$b"
done
grep -q "\"$want\"" "$suite/src/version.h" 2>/dev/null ||
	die "$suite is not redis $want's source (src/version.h): remove it to fetch again"
for u in "${units[@]}"; do
	[ -f "$suite/tests/$u.tcl" ] || die "no unit $u in the suite ($suite/tests/$u.tcl)"
done

# --- the cluster -----------------------------------------------------------
work=$(mktemp -d /tmp/apus-redis-suite-XXXXXX)
conf=$work/shm.conf
sed -e "s#/tmp/apus-demo/#$work/#" -e "s/= 7001\$/= $port/" -e "s/= 7002\$/= $((port + 1))/" \
	-e "s/= 7003\$/= $((port + 2))/" -e '/^metrics_port/d' -e 's/^cluster .*/cluster = redissuite/' \
	-e "s#{config_dir}#$PWD/apps/redis#g" apps/redis/cluster-shm.conf >"$conf"
grep -q "app_port = $((port + 2))" "$conf" || die "could not derive $conf from apps/redis/cluster-shm.conf"

stopped=0
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	[ "$stopped" = 1 ] && return
	stopped=1
	if [ "$keep" = 1 ]; then
		echo "redis-suite: cluster left running: $apus stop --config $conf (work dir $work)"
	else
		"$apus" stop --config "$conf" >/dev/null 2>&1 || true
		echo "redis-suite: runtest output and logs in $work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

st() { "$apus" status --config "$conf" --json 2>/dev/null; }

pids() { st | jq -r '[.nodes[] | "\(.id):\(.pid)"] | join(" ")'; }
divs() { st | jq -r '[.nodes[] | .divergences // 0] | add'; }
restarts() { cat "$work"/node*/apus.guard.log 2>/dev/null |
	grep -Ec 'died|restored|started again|rebuilt|replacing it|not bringing' || true; }
# caught_up - every node has applied the leader's commit (all equal).
caught_up() {
	st | jq -e '(.nodes | map(select(.role=="leader")) | .[0].commit) as $c |
		$c != null and (.nodes | length) == 3 and
		all(.nodes[]; .applied == $c and .commit == $c)' >/dev/null
}

# cluster_ready - one leader and two backups: sets $j (apus status --json).
cluster_ready() {
	j=$(st) || j='{}'
	[ "$(jq -r '[.nodes[]? | select(.role=="leader")] | length' <<<"$j")" = 1 ] &&
		[ "$(jq -r '[.nodes[]? | select(.role=="leader" or .role=="backup")] | length' <<<"$j")" = 3 ]
}
leadership() { st | jq -r '"node \(.leader // "none") view \(.view)"'; }
# await_cluster WHEN - cluster_ready within 60 s, or die.
await_cluster() {
	local i
	for ((i = 0; ; i++)); do
		cluster_ready && return 0
		[ $i -lt 600 ] || die "no leader and two backups after 60 s$1 (apus status --config $conf)"
		sleep 0.1
	done
}

"$apus" start --config "$conf" >"$work/start.out" 2>&1 || { cat "$work/start.out" >&2; die "apus start failed"; }
await_cluster ""
echo "redis-suite: redis $ver suite at $suite; leader $(jq -r '.nodes[] | select(.role=="leader") | .app_addr' <<<"$j"); config $conf"

rc=0
for u in "${units[@]}"; do
	await_cluster " before $u"
	leader=$(jq -r '.nodes[] | select(.role=="leader") | .app_addr' <<<"$j")
	p0=$(pids) d0=$(divs) r0=$(restarts) l0=$(leadership)
	out=$work/$(tr / _ <<<"$u").out
	t0=$(date +%s)
	# Each line of runtest's output stamped with the time it came (to match
	# the nodes' apus.log).
	(cd "$suite" && TERM=dumb timeout "$timeout" ./runtest --host "${leader%:*}" --port "${leader##*:}" \
		--single "$u" --clients 1 "${extra[@]}" 2>&1 && echo "runtest-exit 0" || echo "runtest-exit $?") |
		while IFS= read -r l; do printf '%s %s\n' "$(date +%T.%3N)" "$l"; done >"$out"
	urc=$(sed -n 's/.* runtest-exit \([0-9]*\)$/\1/p' "$out" | tail -1)
	secs=$(($(date +%s) - t0))
	ok=$(grep -Ec '^[0-9:.]+ \[ok\]' "$out" || true)
	err=$(grep -Ec '^[0-9:.]+ \[(err|exception)\]' "$out" || true)
	skip=$(grep -Ec '^[0-9:.]+ \[(skip|ignore)\]' "$out" || true)
	ok_c=0
	for ((i = 0; i < 600; i++)); do caught_up && { ok_c=1; break; }; sleep 0.1; done
	digs=() same=yes
	for n in 0 1 2; do
		digs+=("$(redis-cli -s "$work/node$n/redis.sock" DEBUG DIGEST 2>&1 | tr -d '\r')")
	done
	[ "${digs[0]}" = "${digs[1]}" ] && [ "${digs[1]}" = "${digs[2]}" ] && [ -n "${digs[0]}" ] || same=no
	[ "$ok_c" = 1 ] || same="$same (not caught up after 60 s)"
	p1=$(pids) d1=$(divs) r1=$(restarts) l1=$(leadership)
	rs=0
	[ "$p0" = "$p1" ] || rs="pids $p0 -> $p1"
	[ "$r1" = "$r0" ] || rs="$rs; guard log +$((r1 - r0)) restart lines"
	fo=none
	[ "$l0" = "$l1" ] || fo="$l0 -> $l1"
	nd=$((d1 - d0))
	status=PASS
	{ [ "$same" != yes ] || [ "$rs" != 0 ] || [ "$fo" != none ]; } && { status=FAIL; rc=1; }
	note=""
	[ "$urc" = 124 ] && note=" (runtest timed out after ${timeout}s)"
	grep -q 'All tests passed without errors' "$out" || [ "$err" != 0 ] || [ -n "$note" ] ||
		note=" (runtest exit ${urc:-?}: see $out)"
	printf '%s %s: runtest %d ok, %d failed, %d skipped in %ds%s; digests equal: %s; restarts: %s; leader change: %s; new divergence records: %d\n' \
		"$status" "$u" "$ok" "$err" "$skip" "$secs" "$note" "$same" "$rs" "$fo" "$nd"
	[ "$same" = yes ] || printf '    digest node%d %s\n' 0 "${digs[0]}" 1 "${digs[1]}" 2 "${digs[2]}"
	grep -E '^[0-9:.]+ \[(err|exception)\]' "$out" | sed 's/^/    /' || true
done
exit $rc
