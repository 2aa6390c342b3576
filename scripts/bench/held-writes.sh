#!/usr/bin/env bash
# How often a reply is held for its commit (commit_wait = reply), as a
# count rather than a time, so that it holds on shared cores:
#
#   scripts/bench/held-writes.sh [APUS_BINARY]      default build/bin/apus
#
# Starts apps/redis/cluster-shm.conf (guard off, no snapshot_cmd,
# commit_wait = reply) under a temporary directory, runs redis-benchmark
# SET (50 clients, 64 B values) pipelined by 16 and not, and prints the
# replies that waited for their commit per 1000 requests, from the
# leader's apus_commit_latency_seconds_count.  Ports 7391-7393, metrics
# 7491-7493.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
case ${1:-} in -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
bin=${1:-build/bin/apus}
[ -x "$bin" ] || { echo "no apus binary at $bin (make)" >&2; exit 2; }
# shellcheck source=scripts/bench/redis-shm-cluster.bash
. scripts/bench/redis-shm-cluster.bash
redis_shm_cluster "$bin" held 739 749
sed -i "/^transport/a commit_wait = reply" "$conf"
"$bin" start --config "$conf" >/dev/null || exit 1
held() { curl -s localhost:7491/metrics | awk '/^apus_commit_latency_seconds_count/ { print $2 }'; }
for p in 16 1; do
	n=$((50000 * p + 100000))
	a=$(held)
	redis-benchmark -p 7391 -c 50 -n "$n" -d 64 -r 100000 -P "$p" -t set -q >/dev/null 2>&1
	b=$(held)
	awk -v a="$a" -v b="$b" -v n="$n" -v p="$p" \
		'BEGIN { printf "set pipelined %-2d held_writes_per_kreq=%.1f\n", p, (b - a) * 1000 / n }'
done
