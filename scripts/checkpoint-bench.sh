#!/usr/bin/env bash
# Checkpoint figures for BENCHMARKS.md (issue 5): a 3-replica shm cluster
# whose backups hold KEYS Redis keys (DEBUG POPULATE on the leader, so every
# replica executes it); then
#   - apus checkpoint of a backup: dump time and image size;
#   - kill -9 of that backup, apus restore: time until its server answers
#     PING and until its DEBUG DIGEST equals the leader's;
#   - leader throughput (redis-benchmark SET, 50 clients) with no
#     checkpoint running, and while a backup is checkpointed back to back,
#     interleaved ROUNDS times; the ratio of the medians;
#   - apus rebuild of another backup (data directory deleted) from the
#     first: snapshot size, how long the peer was held, total time.
#
#   scripts/checkpoint-bench.sh [KEYS] [ROUNDS]     (root; CRIU installed)
set -euo pipefail
cd "$(dirname "$0")/.."

keys=${1:-1000000}
rounds=${2:-3}
apus=build/bin/apus
work=$(mktemp -d /tmp/apus-ckbench.XXXXXX)
conf=$work/c.conf
sed -e "s#/tmp/apus-demo#$work#" -e 's/= 700\([123]\)/= 745\1/' \
	-e 's/^guard .*/guard = off/' apps/redis/cluster-shm.conf >"$conf"
cleanup() {
	"$apus" stop --config "$conf" >/dev/null 2>&1 || true
	[ -n "${KEEP:-}" ] && return
	bash scripts/drop-regions.sh "$work"
	rm -rf "$work"
}
trap cleanup EXIT

command -v criu >/dev/null || { echo "checkpoint-bench: criu is not installed" >&2; exit 1; }
make -s all >/dev/null
"$apus" start --config "$conf" >/dev/null
ms() { date +%s%3N; }
sock() { echo "$work/node$1/redis.sock"; }
digest() { redis-cli -s "$(sock "$1")" DEBUG DIGEST; }

echo "populating $keys keys (value 100 B) through the leader"
# In slices of 100k: one long command on three servers sharing two cores
# would starve the heartbeats and trigger a failover.
for ((done_ = 0, i = 0; done_ < keys; i++)); do
	n=$((keys - done_ < 100000 ? keys - done_ : 100000))
	redis-cli -p 7451 DEBUG POPULATE "$n" "key$i:" 100 >/dev/null
	done_=$((done_ + n))
	sleep 0.3
done
until [ "$(digest 1)" = "$(digest 0)" ] && [ "$(digest 2)" = "$(digest 0)" ]; do sleep 0.2; done
rss=$(ps -o rss= -p "$(cat "$work/node1/apus.pid")")

out=$("$apus" checkpoint --config "$conf" --node 1)
echo "$out" | tail -n 1
dump_ms=$(sed -n 's/.* dump \([0-9]*\) ms$/\1/p' <<<"$out" | tail -n 1)
image_mb=$(sed -n 's/.*images \([0-9.]*\) MB.*/\1/p' <<<"$out" | tail -n 1)

pid=$(cat "$work/node1/apus.pid")
kill -KILL "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
redis-cli -p 7451 SET after-kill 1 >/dev/null
t0=$(ms)
"$apus" restore --config "$conf" --node 1 >/dev/null
until redis-cli -s "$(sock 1)" PING >/dev/null 2>&1; do sleep 0.01; done
t_ping=$(($(ms) - t0))
until [ "$(digest 1)" = "$(digest 0)" ]; do sleep 0.01; done
t_equal=$(($(ms) - t0))

tput() { # one redis-benchmark SET run against the leader: requests per second
	redis-benchmark -p 7451 -c 50 -n 200000 -t set -r 100000 -d 64 -q 2>/dev/null |
		tr '\r' '\n' | sed -n 's/^SET: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1
}
quiet=() busy=()
for ((r = 0; r < rounds; r++)); do
	quiet+=("$(tput)")
	touch "$work/busy"
	( while [ -e "$work/busy" ]; do "$apus" checkpoint --config "$conf" --node 1 >/dev/null 2>&1 || true; done ) &
	loop=$!
	busy+=("$(tput)")
	# The checkpoint under way finishes (a killed one would leave its dump behind).
	rm -f "$work/busy"
	wait "$loop" 2>/dev/null || true
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mq=$(median "${quiet[@]}")
mb=$(median "${busy[@]}")

# Rebuilding backup 2 from backup 1's snapshot (data directory deleted).
"$apus" stop --config "$conf" --node 2 >/dev/null
rm -rf "$work/node2"
rb=$("$apus" rebuild --config "$conf" --node 2 --from 1 --json)
until [ "$(digest 2)" = "$(digest 0)" ]; do sleep 0.2; done

echo
echo "| keys | backup RSS | image | dump (left running) | restore until PING | until digest = leader's |"
echo "|---|---|---|---|---|---|"
echo "| $keys | $((rss / 1024)) MB | $image_mb MB | $dump_ms ms | $t_ping ms | $t_equal ms |"
echo
echo "leader SET throughput, 50 clients: no checkpoint ${quiet[*]} (median $mq) req/s;"
echo "backup checkpointed back to back ${busy[*]} (median $mb) req/s;"
awk -v a="$mb" -v b="$mq" 'BEGIN { printf "ratio during/before: %.1f%%\n", 100 * a / b }'
echo
echo "apus rebuild of node 2 from node 1: $rb"
