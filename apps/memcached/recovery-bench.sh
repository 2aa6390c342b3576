#!/usr/bin/env bash
# memcached's recovery points, measured side by side in one run:
#   bare cold start   memcached started empty (its own cold start: it
#                     keeps nothing), and started then given the snapshot
#                     file with load.py (what a restarted node does)
#   snapshot          snapshot.py of ITEMS items on a bare memcached: how
#                     long a backup is held while its recovery point is read
#   apus restart      3 replicas as shipped (apps/memcached/cluster-shm.conf:
#                     guard on, snapshots by backups, load.py at start), a
#                     log that wrapped; then kill -9 of every server (the
#                     guards bring them back) and apus stop + apus start:
#                     seconds until a leader serves every item, and until
#                     every node is back and recoverable
#   CRIU              apus checkpoint of a backup before the kill (what the
#                     guard takes every checkpoint_interval_s): how long
#                     the dump froze the server, and the images' size
#   leader throughput loadgen sets through the leader with recovery points
#                     taken every snapshot_log_bytes (a quarter of the log),
#                     with none (no snapshot_cmd), and with none but a
#                     backup checkpointed by CRIU back to back: the ratios
#
#   apps/memcached/recovery-bench.sh [ITEMS] [SIZE] [LOG]
#     ITEMS  items written (default 100000), SIZE bytes each (default 1000),
#     LOG    the log's size (default 16M); 1 GB of items: 65536 16384 256M
#
# Every item written is checked on every replica after each restart
# (digest.py --all: same digest, ITEMS items).  Ports 19940-19959 (apus
# app 19941-19943, admin 19950-19952, bare 19945/19946).
set -euo pipefail
cd "$(dirname "$0")/../.."

case ${1:-} in -h | --help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;; esac
items=${1:-100000}
size=${2:-1000}
log=${3:-16M}
[[ "$items" =~ ^[1-9][0-9]*$ && "$size" =~ ^[1-9][0-9]*$ && "$log" =~ ^[1-9][0-9]*[KMG]?$ ]] ||
	{ echo "usage: apps/memcached/recovery-bench.sh [ITEMS] [SIZE] [LOG]" >&2; exit 2; }
make -s all bench-bin
apus=build/bin/apus
loadgen=build/bench/loadgen
mc=apps/memcached
work=$(mktemp -d /tmp/apus-mc-rbench-XXXXXX)
mem=$((items * (size + 100) / 1000000 * 2 + 64))	# -m: items never evicted

# The shipped config on this script's ports, in its work directory.
conf=$work/shm.conf
sed -e "s#/tmp/apus-memcached/#$work/#" -e 's/= 730\([123]\)$/= 1994\1/' \
	-e 's/1731{node}/1995{node}/g' -e '/^metrics_port/d' -e "s/^log_size .*/log_size = $log/" \
	-e 's/^cluster .*/cluster = mcrbench/' -e "s/ -m 64 / -m $mem /" -e '/^verify_cmd/d' \
	-e "s#{config_dir}#$PWD/$mc#g" $mc/cluster-shm.conf >"$conf"

# shellcheck source=../../scripts/bench/recovery-lib.bash
. scripts/bench/recovery-lib.bash
bare() { # PORT: start a bare memcached, wait until it answers
	memcached -p "$1" -l "127.0.0.1:$1" -U 0 -t 4 -u root -m "$mem" -c 1024 3>&- &
	echo $! >"$work/bare.$1"
	for _ in $(seq 100); do
		python3 $mc/digest.py --port "$1" --keys 1 >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}
unbare() { kill "$(cat "$work/bare.$1")" 2>/dev/null || true; }
fill() { # HOST PORT: ITEMS distinct items of SIZE bytes
	"$loadgen" --proto memcached --host "$1" --port "$2" --op set --clients 20 \
		--requests "$items" --keyspace "$items" --size "$size" --seed 3 >"$work/fill.out" ||
		{ cat "$work/fill.out" >&2; return 1; }
}
count() { python3 $mc/digest.py --port "$1" --all 2>/dev/null | cut -d' ' -f2; }
serving() { # a leader answers and holds WANT items
	local a n
	a=$(leader_addr) || return 1
	n=${a##*:}
	[ "$(count $((19950 + n - 19941)))" = "$want" ]
}
all_back() { # every node recoverable, one leader, equal digests of WANT items
	local d first=""
	all_recoverable || return 1
	for n in 0 1 2; do
		d=$(python3 $mc/digest.py --port $((19950 + n)) --all 2>/dev/null) || return 1
		[ "${d#* }" = "$want" ] || return 1
		[ -z "$first" ] && first=$d
		[ "$d" = "$first" ] || return 1
	done
}
cleanup() {
	unbare 19945
	unbare 19946
	"$apus" stop --config "$conf" >/dev/null 2>&1 3>&- || true
	sleep 0.5
	bash scripts/drop-regions.sh "$work"
	rm -rf "$work"
}
trap cleanup EXIT

echo "memcached recovery, $items items of $size B (-m $mem), log $log; $(nproc) cores, $(date -u +%F)"
echo
table_head
# Bare: the server's own cold start, then with load.py.
t0=$(now_ms); bare 19945; row "bare memcached cold start (empty)" "$(since "$t0")"
fill 127.0.0.1 19945
want=$(count 19945)
t0=$(now_ms)
python3 $mc/snapshot.py --port 19945 --out "$work/bare.snap" >/dev/null
row "snapshot.py of $want items ($(($(stat -c %s "$work/bare.snap") / 1000000)) MB): a backup's hold" "$(since "$t0")"
unbare 19945
t0=$(now_ms); bare 19946
python3 $mc/load.py --port 19946 --in "$work/bare.snap" >/dev/null
row "bare memcached cold start + load.py" "$(since "$t0")"
[ "$(count 19946)" = "$want" ] || echo "(load.py restored $(count 19946) of $want items)"
unbare 19946

# apus as shipped.
"$apus" start --config "$conf" >/dev/null 3>&-
a=$(leader_addr)
fill "${a%:*}" "${a##*:}"
want=$(count $((19950 + ${a##*:} - 19941)))
sleep 5	# the backups' snapshots of the last quarter log
b=$(( ($(leader_node) + 1) % 3 ))
read -r dump_ms image_mb < <(checkpoint_backup "$b")
row "CRIU checkpoint of a backup (as the guard takes them): the dump, server frozen ($image_mb MB of images)" "$(awk -v m="$dump_ms" 'BEGIN { printf "%.1f", m / 1000 }')"
kill_all
row "apus, kill -9 of all: a leader serves all $want items" "$(wait_for serving)"
row "apus, kill -9 of all: every node back, equal" "$(wait_for all_back)"
row "apus stop + apus start: apus start returns" "$(stop_start)"
row "apus stop + apus start: then a leader serves all items" "$(wait_for serving)"
row "apus stop + apus start: then every node back, equal" "$(wait_for all_back)"
"$apus" stop --config "$conf" >/dev/null 3>&-

# Leader throughput, each on a fresh cluster: recovery points taken (a
# snapshot per quarter log), none (no snapshot_cmd), and none but a backup
# checkpointed with CRIU back to back.
sets() { # HOST PORT -> loadgen's requests/s of ITEMS sets
	"$loadgen" --proto memcached --host "$1" --port "$2" --op set --clients 20 \
		--requests "$items" --keyspace "$items" --size "$size" --seed 4 | grep -o 'rps=[0-9.]*' | cut -d= -f2
}
sed -e '/^snapshot_/d' -e 's/^cluster .*/cluster = mcrbench-none/' -e "s#$work/node#$work/none/node#" "$conf" >"$work/none.conf"
rm -rf "$work"/node*
on=$(on_fresh_cluster "$conf" sets)
off=$(on_fresh_cluster "$work/none.conf" sets)
rm -rf "$work/none"
ckpt=$(on_fresh_cluster "$work/none.conf" ckpt sets)
echo
echo "leader sets/s: none $off; recovery points taken $on (ratio $(ratio "$on" "$off")); a backup checkpointed back to back $ckpt (ratio $(ratio "$ckpt" "$off"))"
