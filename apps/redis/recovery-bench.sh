#!/usr/bin/env bash
# Redis's recovery, measured side by side in one run:
#   bare cold start   redis-server loading an RDB of the same data (its
#                     own restart) until it answers PING
#   apus restart      3 replicas as shipped (apps/redis/cluster-shm.conf:
#                     guard on, CRIU checkpoints, BGSAVE snapshots), a log
#                     that wrapped; then kill -9 of every server (the
#                     guards bring them back) and apus stop + apus start:
#                     seconds until a leader serves every key, and until
#                     every node is back, recoverable and equal
#   CRIU              apus checkpoint of a backup before the kill: how long
#                     the dump froze the server, and the images' size
#   leader throughput redis-benchmark SETs through the leader with
#                     recovery points taken (a BGSAVE per quarter log), with
#                     none (no snapshot_cmd), and with none but a backup
#                     checkpointed by CRIU back to back: the ratios
#
#   apps/redis/recovery-bench.sh [KEYS] [SIZE] [LOG]
#     KEYS keys of SIZE bytes (default 1000000 of 100) loaded with DEBUG
#     POPULATE, then SETs that fill the log (LOG, default 16M) about four
#     times over.
#
# Every replica's DEBUG DIGEST is compared after each restart.  Ports
# 20600-20619 (apus app 20601-20603, bare 20605).
set -euo pipefail
cd "$(dirname "$0")/../.."

case ${1:-} in -h | --help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;; esac
keys=${1:-1000000}
size=${2:-100}
log=${3:-16M}
[[ "$keys" =~ ^[1-9][0-9]*$ && "$size" =~ ^[1-9][0-9]*$ && "$log" =~ ^[1-9][0-9]*[KMG]?$ ]] ||
	{ echo "usage: apps/redis/recovery-bench.sh [KEYS] [SIZE] [LOG]" >&2; exit 2; }
command -v criu >/dev/null || { echo "recovery-bench: criu is not installed" >&2; exit 1; }
make -s all
apus=build/bin/apus
work=$(mktemp -d /tmp/apus-redis-rbench-XXXXXX)
log_bytes=$(numfmt --from=iec "$log")

conf=$work/shm.conf
sed -e "s#/tmp/apus-demo/#$work/#" -e 's/= 700\([123]\)$/= 2060\1/' -e '/^metrics_port/d' \
	-e "s/^log_size .*/log_size = $log/" -e 's/^cluster .*/cluster = redisrbench/' \
	-e '/^verify_cmd/d' -e "s#{config_dir}#$PWD/apps/redis#g" apps/redis/cluster-shm.conf >"$conf"

# shellcheck source=../../scripts/bench/recovery-lib.bash
. scripts/bench/recovery-lib.bash
sock() { echo "$work/node$1/redis.sock"; }
# populate HOST PORT [leader] - KEYS keys by DEBUG POPULATE, in slices of
# 20,000: one long command on three servers sharing two cores would starve
# the heartbeats.  A slice that fails is sent again (DEBUG POPULATE skips
# existing keys); with "leader", to the leader of then (a failover).
populate() {
	local done_ i n a=$1:$2
	for ((done_ = 0, i = 0; done_ < keys; i++)); do
		n=$((keys - done_ < 20000 ? keys - done_ : 20000))
		until redis-cli -h "${a%:*}" -p "${a##*:}" DEBUG POPULATE "$n" "key$i:" "$size" >/dev/null 2>&1; do
			sleep 1
			[ "${3:-}" != leader ] || a=$(leader_addr) || true
		done
		done_=$((done_ + n))
	done
}
# fill PORT [leader] - populate, then SETs of other keys that fill the log
# about four times over, in 16 runs; a run that fails (a failover: a
# snapshot's fork on two shared cores can stall the leader's heartbeats
# past suspect_ms) is run again, with "leader", on the leader of then.
fill() {
	local i a=127.0.0.1:$1
	populate 127.0.0.1 "$1" "${2:-}"
	for ((i = 0; i < 16; i++)); do
		until redis-benchmark -h "${a%:*}" -p "${a##*:}" -t set -n $((log_bytes / 256)) -r 100000 \
			-d 16 -c 20 -P 16 -q >/dev/null 2>&1; do
			sleep 1
			[ "${2:-}" != leader ] || a=$(leader_addr) || true
		done
	done
}
dbsize() { redis-cli -p "$1" DBSIZE 2>/dev/null; }
serving() { # a leader answers and holds WANT keys
	local a
	a=$(leader_addr) || return 1
	[ "$(dbsize "${a##*:}")" = "$want" ]
}
all_back() { # every node recoverable, one leader, equal digests
	local n d first=""
	all_recoverable || return 1
	for n in 0 1 2; do
		d=$(redis-cli -s "$(sock "$n")" DEBUG DIGEST 2>/dev/null) || return 1
		[ -n "$d" ] || return 1
		[ -z "$first" ] && first=$d
		[ "$d" = "$first" ] || return 1
	done
}
bare_args() { # PORT DIR
	echo --port "$1" --bind 127.0.0.1 --dir "$2" --save "" --appendonly no \
		--enable-debug-command local --daemonize no --logfile "$2/redis.log"
}
bare_pid=""
cleanup() {
	[ -n "$bare_pid" ] && kill "$bare_pid" 2>/dev/null
	"$apus" stop --config "$conf" >/dev/null 2>&1 3>&- || true
	sleep 0.5
	bash scripts/drop-regions.sh "$work"
	rm -rf "$work"
}
trap cleanup EXIT

echo "Redis recovery, $keys keys of $size B and $((log_bytes / 16)) SETs, log $log; $(nproc) cores, $(date -u +%F)"
echo
table_head
# Bare: the same load, SAVE, then a cold start loading that RDB.
mkdir -p "$work/bare"
# shellcheck disable=SC2046 # bare_args is a list of words
redis-server $(bare_args 20605 "$work/bare") 3>&- &
bare_pid=$!
until redis-cli -p 20605 PING >/dev/null 2>&1; do sleep 0.05; done
fill 20605
bare_keys=$(dbsize 20605)
redis-cli -p 20605 SAVE >/dev/null
kill "$bare_pid"
wait "$bare_pid" || true
t0=$(now_ms)
# shellcheck disable=SC2046
redis-server $(bare_args 20605 "$work/bare") --dbfilename dump.rdb 3>&- &
bare_pid=$!
until [ "$(redis-cli -p 20605 PING 2>/dev/null)" = PONG ]; do sleep 0.01; done
row "bare redis-server cold start: loads its RDB of $bare_keys keys ($(($(stat -c %s "$work/bare/dump.rdb") / 1000000)) MB) until PING" "$(since "$t0")"
kill "$bare_pid"
wait "$bare_pid" || true
bare_pid=""

# apus as shipped.
"$apus" start --config "$conf" >/dev/null 3>&-
a=$(leader_addr)
fill "${a##*:}" leader
want=$(dbsize "${a##*:}")
wait_for all_back >/dev/null
read -r dump_ms image_mb < <(checkpoint_backup $((($(leader_node) + 1) % 3)))
row "CRIU checkpoint of a backup: the dump, server frozen ($image_mb MB of images)" "$(awk -v m="$dump_ms" 'BEGIN { printf "%.1f", m / 1000 }')"
kill_all
row "apus, kill -9 of all: a leader serves all $want keys" "$(wait_for serving)"
row "apus, kill -9 of all: every node back, equal" "$(wait_for all_back)"
row "apus stop + apus start: apus start returns" "$(stop_start)"
row "apus stop + apus start: then a leader serves all keys" "$(wait_for serving)"
row "apus stop + apus start: then every node back, equal" "$(wait_for all_back)"
"$apus" stop --config "$conf" >/dev/null 3>&-

# Leader throughput, each on a fresh cluster.
sets() { # HOST PORT -> redis-benchmark's SETs/s, 50 clients, over KEYS populated keys
	populate "$1" "$2" leader
	redis-benchmark -h "$1" -p "$2" -c 50 -n 300000 -t set -r 100000 -d 64 -q 2>/dev/null |
		tr '\r' '\n' | sed -n 's/^SET: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1
}
sed -e '/^snapshot_/d' -e 's/^cluster .*/cluster = redisrbench-none/' -e "s#$work/node#$work/none/node#" \
	"$conf" >"$work/none.conf"
rm -rf "$work"/node*
on=$(on_fresh_cluster "$conf" sets)
off=$(on_fresh_cluster "$work/none.conf" sets)
rm -rf "$work/none"
ckpt=$(on_fresh_cluster "$work/none.conf" ckpt sets)
echo
echo "leader SETs/s: none $off; recovery points taken $on (ratio $(ratio "$on" "$off")); a backup checkpointed back to back $ckpt (ratio $(ratio "$ckpt" "$off"))"
