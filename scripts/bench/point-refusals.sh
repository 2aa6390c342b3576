#!/usr/bin/env bash
# What it costs that Redis's recovery points never cut a pipelined request
# or an open MULTI (apps/redis/snapshot.sh asks CLIENT LIST in the fork's
# pass and exits 75 when a client is caught): pipelined SETs through the
# leader of 3 replicas as shipped (apps/redis/cluster-shm.conf, guard on)
# with a small log, so that every node takes a recovery point every few
# seconds, once per snapshot script given, in interleaved rounds.
#
#   scripts/bench/point-refusals.sh [ROUNDS] [REQUESTS] [PIPELINE] [LOG]
#     ROUNDS rounds (default 3) of REQUESTS SETs (default 1000000) of 64 B
#     from POINT_CLIENTS (default 10) clients pipelining PIPELINE (default
#     16), log LOG (default 8M).  (With 20 or more clients on two cores, a
#     snapshot's fork stalls the leader's heartbeats past 100 ms and a
#     failover ends the run: its row says so.)
#   POINT_SCRIPTS="name:path ..." the snapshot scripts to compare (default
#     "shipped:apps/redis/snapshot.sh"; e.g. add old:/tmp/old-snapshot.sh,
#     from git show <commit>:apps/redis/snapshot.sh).
#
# Per script and round: SETs/s, recovery points taken (all nodes), how
# many times snapshot.sh refused one (a client caught), and how many
# times refusals gave up after 5 s in a row.  Ports 20620-20629.
set -euo pipefail
cd "$(dirname "$0")/../.."

case ${1:-} in -h | --help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;; esac
rounds=${1:-3}
requests=${2:-1000000}
pipeline=${3:-16}
log=${4:-8M}
[[ "$rounds" =~ ^[1-9][0-9]*$ && "$requests" =~ ^[1-9][0-9]*$ && "$pipeline" =~ ^[1-9][0-9]*$ &&
	"$log" =~ ^[1-9][0-9]*[KMG]?$ ]] ||
	{ echo "usage: scripts/bench/point-refusals.sh [ROUNDS] [REQUESTS] [PIPELINE] [LOG]" >&2; exit 2; }
read -r -a scripts <<<"${POINT_SCRIPTS:-shipped:apps/redis/snapshot.sh}"
for s in "${scripts[@]}"; do
	[ -x "${s#*:}" ] || { echo "point-refusals: ${s#*:} is not an executable script" >&2; exit 2; }
done
make -s all
apus=$PWD/build/bin/apus
work=$(mktemp -d /tmp/apus-point-refusals-XXXXXX)
conf=$work/shm.conf

cleanup() {
	"$apus" stop --config "$conf" >/dev/null 2>&1 3>&- || true
	bash scripts/drop-regions.sh "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# run SCRIPT - one cluster's run with snapshot_cmd SCRIPT: "sets/s points
# refusals give-ups".
run() {
	local script=$1 out sets points refusals giveups
	[[ "$script" == /* ]] || script=$PWD/$script
	"$apus" stop --config "$conf" >/dev/null 2>&1 3>&- || true
	bash scripts/drop-regions.sh "$work" 2>/dev/null || true
	rm -rf "$work"/node*
	sed -e "s#/tmp/apus-demo/#$work/#" -e 's/= 700\([123]\)$/= 2062\1/' -e '/^metrics_port/d' \
		-e "s/^log_size .*/log_size = $log/" -e 's/^cluster .*/cluster = pointrefusals/' \
		-e '/^verify_cmd/d' -e "s#^snapshot_cmd .*#snapshot_cmd = $script {data_dir}/redis.sock#" \
		-e "s#{config_dir}#$PWD/apps/redis#g" apps/redis/cluster-shm.conf >"$conf"
	"$apus" start --config "$conf" >"$work/start.out" 2>&1 3>&- ||
		{ echo "point-refusals: apus start failed: $(tail -n 5 "$work/start.out")" >&2; return 1; }
	out=$(redis-benchmark -h 127.0.0.1 -p 20621 -t set -n "$requests" -r 100000 -d 64 -c "${POINT_CLIENTS:-10}" \
		-P "$pipeline" -q 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -n 1) ||
		true
	sets=$(awk '{print int($2)}' <<<"$out")
	# (A run that a failover cut short: a fork on two shared cores can
	# stall the leader's heartbeats.)
	! cat "$work"/node*/apus.log | grep -q 'election: standing for view' || sets="${sets:-0} (failover)"
	points=$(cat "$work"/node*/apus.log | grep -c 'snapshot at entry' || true)
	refusals=$(cat "$work"/node*/apus.log | grep -c 'snapshot.sh: not a recovery point' || true)
	giveups=$(cat "$work"/node*/apus.log | grep -c 'refused for 5 s in a row' || true)
	echo "$points $refusals $giveups ${sets:-failed}"
}

echo "Redis SET -P $pipeline, ${POINT_CLIENTS:-10} clients, $requests requests a run, log $log; $(nproc) cores, $(date -u +%F)"
echo
echo "| round | script | SETs/s | points (3 nodes) | refused (client caught) | taken after 5 s of refusals |"
echo "|---|---|---:|---:|---:|---:|"
for ((round = 1; round <= rounds; round++)); do
	for s in "${scripts[@]}"; do
		read -r points refusals giveups sets < <(run "${s#*:}") || sets=failed
		echo "| $round | ${s%%:*} | $sets | $points | $refusals | $giveups |"
	done
done
