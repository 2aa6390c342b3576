#!/usr/bin/env bash
# Replacing a replica, measured (BENCHMARKS.md, issue 20):
#
#   scripts/membership-bench.sh [KEYS]
#
# A 3-node shm cluster holding KEYS keys (default 1,000,000, DEBUG POPULATE
# through the leader) serves a light writer (4 clients of SETs) throughout.
# Side by side, in one run:
#   rebuild  - node 2 stopped and its data directory deleted, then
#              apus rebuild --node 2: until it joined, and until it is current
#              (its applied index within 1,000 entries of the leader's commit);
#   replace  - node 1 killed (kill -9), then apus replace --node 1 --address
#              127.0.0.1 --app-port P: until the new node votes and node 1 is
#              removed (the command returns then: it waits for both).
# The cluster lives under /tmp/apus-mbench and is removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

KEYS=${1:-1000000}
case ${KEYS:-} in -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[[ "$KEYS" =~ ^[0-9]+$ ]] || { echo "usage: $0 [KEYS]" >&2; exit 2; }
APUS=build/bin/apus
ROOT=/tmp/apus-mbench
BASE=7700
make -s all >/dev/null

cleanup() {
	[ -n "${WRITER:-}" ] && kill "$WRITER" 2>/dev/null
	[ -f "$ROOT/apus.conf" ] && "$APUS" stop --config "$ROOT/apus.conf" >/dev/null 2>&1 || true
	[ -d "$ROOT" ] && scripts/drop-regions.sh "$ROOT" >/dev/null 2>&1 || true
	rm -rf "$ROOT"
}
trap cleanup EXIT
cleanup
mkdir -p "$ROOT"
C=$ROOT/apus.conf
{
	echo "cluster = mbench"
	echo "transport = shm"
	echo "log_size = 64M"
	echo "fsync = batch"
	echo "guard = off"
	echo "snapshot_cmd = $PWD/apps/redis/snapshot.sh {data_dir}/redis.sock"
	echo "snapshot_file = dump.rdb"
	echo "app_cmd = redis-server --port {port} --bind {address} --dir {data_dir} --unixsocket {data_dir}/redis.sock --save \"\" --appendonly no --daemonize no --enable-debug-command local --logfile \"\""
	for i in 0 1 2; do
		printf '[node %d]\napp_port = %d\ndata_dir = %s/n%d\n' "$i" $((BASE + i + 1)) "$ROOT" "$i"
	done
} >"$C"

ms() { date +%s%3N; }
json_num() { grep -o "\"$2\":[0-9]*" <<<"$1" | head -n 1 | cut -d: -f2; }
leader() { json_num "$("$APUS" status --config "$C" --json)" leader; }
leader_port() { "$APUS" status --config "$C" | sed -n 's/.*leader node [0-9]* ([^)]*:\([0-9]*\)).*/\1/p'; }

# current NODE - until NODE's applied index is within 1,000 of the leader's commit.
current() {
	local j l c a
	while :; do
		j=$("$APUS" status --config "$C" --json | tr -d ' \n')
		l=$(json_num "$j" leader)
		c=$(grep -o "{\"id\":$l,[^}]*}" <<<"$j" | grep -o '"commit":[0-9]*' | cut -d: -f2)
		a=$(grep -o "{\"id\":$1,[^}]*}" <<<"$j" | grep -o '"applied":[0-9]*' | cut -d: -f2)
		[ -n "$c" ] && [ -n "$a" ] && [ $((a + 1000)) -ge "$c" ] && return 0
		sleep 0.05
	done
}

"$APUS" start --config "$C" >/dev/null
P=$(leader_port)
redis-cli -p "$P" DEBUG POPULATE "$KEYS" key 64 >/dev/null
for n in 0 1 2; do
	until [ "$(redis-cli -s "$ROOT/n$n/redis.sock" DBSIZE)" = "$KEYS" ]; do sleep 0.1; done
done
echo "== $KEYS keys on every node ($(stat -c %s "$ROOT/n0/dump.rdb" 2>/dev/null || echo '?') bytes of RDB once a node snapshots)"
redis-benchmark -p "$P" -t set -n 100000000 -r "$KEYS" -d 64 -c 4 -q >/dev/null 2>&1 &
WRITER=$!
sleep 2

echo "== rebuild: node 2 stopped, its data directory deleted, apus rebuild --node 2"
"$APUS" stop --config "$C" --node 2 >/dev/null
rm -rf "$ROOT/n2"
t0=$(ms)
out=$("$APUS" rebuild --config "$C" --node 2 --json)
t1=$(ms)
current 2
t2=$(ms)
echo "$out"
echo "rebuild: joined after $((t1 - t0)) ms, current after $((t2 - t0)) ms"

echo "== replace: node 1 killed, apus replace --node 1 --address 127.0.0.1 --app-port $((BASE + 4))"
kill -KILL "$(cat "$ROOT/n1/apus.pid")"
t0=$(ms)
out=$("$APUS" replace --config "$C" --node 1 --address 127.0.0.1 --app-port $((BASE + 4)))
t1=$(ms)
current 3
t2=$(ms)
echo "$out"
echo "replace: the new node votes and node 1 is removed after $((t1 - t0)) ms, current after $((t2 - t0)) ms"
echo "DBSIZE per member: $(for n in 0 2 3; do redis-cli -s "$ROOT/n$n/redis.sock" DBSIZE; done | tr '\n' ' ')"
kill "$WRITER" 2>/dev/null
WRITER=
