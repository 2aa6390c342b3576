#!/usr/bin/env bash
# Durability past the log's end, measured (BENCHMARKS.md, issue 17):
#
#   scripts/durability-bench.sh [KEYS] [ROUNDS]
#
# 1. Restart: a cluster holding KEYS keys (default 1,000,000) whose 64 MB
#    log wrapped is stopped and started again (apus stop; apus start, which
#    returns once a leader serves the full state); side by side, the floor:
#    a bare redis-server loading the same data's RDB until it answers PING.
# 2. Leader SET throughput, 50 clients, 400k SETs a round, with every node
#    snapshotting itself (snapshot_log_bytes = $APUS_DBENCH_SNAP_BYTES,
#    default 16M: a quarter of the 64 MB log, the default) against the same
#    cluster without snapshot_cmd, ROUNDS (3) interleaved rounds.
# Clusters live under /tmp/apus-dbench and are removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

KEYS=${1:-1000000}
ROUNDS=${2:-3}
case ${KEYS:-} in -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[[ "$KEYS" =~ ^[0-9]+$ && "$ROUNDS" =~ ^[0-9]+$ ]] || { echo "usage: $0 [KEYS] [ROUNDS]" >&2; exit 2; }
APUS=build/bin/apus
ROOT=/tmp/apus-dbench
make -s all >/dev/null

# conf NAME PORTBASE SNAPSHOTS(on|off) - write a 3-node shm config, print its path.
conf() {
	local dir=$ROOT/$1 i
	mkdir -p "$dir"
	{
		echo "cluster = dbench-$1"
		echo "transport = shm"
		echo "log_size = 64M"
		echo "fsync = batch"
		echo "guard = off"
		if [ "$3" = on ]; then
			echo "snapshot_cmd = $PWD/apps/redis/snapshot.sh {data_dir}/redis.sock"
			echo "snapshot_file = dump.rdb"
			echo "snapshot_log_bytes = ${SNAP_BYTES:-16M}"
		fi
		echo "app_cmd = redis-server --port {port} --bind {address} --dir {data_dir} --unixsocket {data_dir}/redis.sock --save \"\" --appendonly no --daemonize no --logfile \"\""
		for i in 0 1 2; do
			printf '[node %d]\napp_port = %d\ndata_dir = %s/n%d\n' "$i" $(($2 + i + 1)) "$dir" "$i"
		done
	} >"$dir/apus.conf"
	echo "$dir/apus.conf"
}

leader_port() {
	"$APUS" status --config "$1" | sed -n 's/.*leader node [0-9]* ([^)]*:\([0-9]*\)).*/\1/p'
}

cleanup() {
	for c in "$ROOT"/*/apus.conf; do
		[ -f "$c" ] && "$APUS" stop --config "$c" >/dev/null 2>&1 || true
	done
	[ -d "$ROOT" ] && scripts/drop-regions.sh "$ROOT" >/dev/null 2>&1 || true
	rm -rf "$ROOT"
}
trap cleanup EXIT
cleanup
ms() { date +%s%3N; }

echo "== restart of a cluster holding $KEYS keys whose log wrapped"
SNAP_BYTES=16M C=$(conf restart 7600 on)
"$APUS" start --config "$C" >/dev/null
P=$(leader_port "$C")
redis-benchmark -p "$P" -t set -n "$KEYS" -r $((KEYS * 100)) -d 16 -c 50 -P 16 -q >/dev/null
sleep 2
keys=$(redis-cli -p "$(leader_port "$C")" DBSIZE)
j=$("$APUS" status --config "$C" --json)
echo "keys $keys; log written $(grep -o '"log_pos":[0-9]*' <<<"$j" | head -n 1 | cut -d: -f2) bytes (a 64 MB log)"
echo "recovery points: $(grep -o '"snapshot_index":[0-9]*' <<<"$j" | cut -d: -f2 | tr '\n' ' ')"
"$APUS" stop --config "$C" >/dev/null
t0=$(ms)
"$APUS" start --config "$C" >/dev/null
t1=$(ms)
after=$(redis-cli -p "$(leader_port "$C")" DBSIZE)
echo "apus start (3 nodes, election, log after the snapshots): $((t1 - t0)) ms, DBSIZE $after"
# The floor: the same data as one RDB (a backup's SAVE on its admin socket).
redis-cli -s "$ROOT/restart/n1/redis.sock" SAVE >/dev/null
rdb=$ROOT/restart/n1/dump.rdb
mkdir -p "$ROOT/bare" && cp "$rdb" "$ROOT/bare/dump.rdb"
t0=$(ms)
redis-server --port 7690 --dir "$ROOT/bare" --save "" --daemonize no --logfile "" >/dev/null &
bare=$!
until [ "$(redis-cli -p 7690 PING 2>/dev/null)" = PONG ]; do sleep 0.005; done
t1=$(ms)
echo "redis-server loading the same data's RDB ($(stat -c %s "$rdb") bytes): $((t1 - t0)) ms, DBSIZE $(redis-cli -p 7690 DBSIZE)"
kill "$bare"; wait "$bare" 2>/dev/null || true
"$APUS" stop --config "$C" >/dev/null

echo "== leader SET throughput, 50 clients: snapshots (every ${APUS_DBENCH_SNAP_BYTES:-16M} of log per node) vs none"
A=$(SNAP_BYTES=${APUS_DBENCH_SNAP_BYTES:-16M} conf snap 7620 on)
B=$(conf nosnap 7640 off)
"$APUS" start --config "$A" >/dev/null
"$APUS" start --config "$B" >/dev/null
for ((r = 1; r <= ROUNDS; r++)); do
	for c in "$A" "$B"; do
		rps=$(redis-benchmark -p "$(leader_port "$c")" -t set -n 400000 -r 10000000 -d 64 -c 50 -q 2>&1 |
			tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -n 1 | cut -d' ' -f1) || rps=failed
		snaps=$("$APUS" status --config "$c" --json | grep -o '"snapshots":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
		echo "round $r $(basename "$(dirname "$c")"): $rps SET/s (snapshots taken per node so far: ${snaps:-none})"
	done
done
