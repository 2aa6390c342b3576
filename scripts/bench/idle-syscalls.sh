#!/usr/bin/env bash
# What an idle replica costs: the system calls each of its processes
# makes per second with no client at all (the role thread's heartbeats and
# peer checks), and the CPU they take, as counts that hold on shared cores:
#
#   scripts/bench/idle-syscalls.sh [APUS_BINARY] [SECONDS]   default build/bin/apus, 10
#
# Starts apps/redis/cluster-shm.conf (guard off, no snapshot_cmd) under a
# temporary directory, lets it settle, then for the leader's server and
# one backup's: every thread under strace -c for SECONDS (calls per second,
# by call), then SECONDS without strace (CPU ticks per second, all
# threads).  Ports 7401-7403, metrics 7501-7503.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
case ${1:-} in -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
bin=${1:-build/bin/apus}
secs=${2:-10}
[ -x "$bin" ] || { echo "no apus binary at $bin (make)" >&2; exit 2; }
command -v strace >/dev/null || { echo "needs strace" >&2; exit 2; }
# shellcheck source=scripts/bench/redis-shm-cluster.bash
. scripts/bench/redis-shm-cluster.bash
redis_shm_cluster "$bin" idle 740 750
"$bin" start --config "$conf" >/dev/null || exit 1
sleep 2
json=$("$bin" status --config "$conf" --json | tr -d ' \t\r\n')
pid_of() { # ROLE: the pid of the first node in that role
	grep -o "{[^{}]*\"role\":\"$1\"[^{}]*}" <<<"$json" | head -1 | grep -o '"pid":[0-9]*' | cut -d: -f2
}
ticks() { cut -d')' -f2- "/proc/$1/stat" | awk '{print $12 + $13}'; }
hz=$(getconf CLK_TCK)
for role in leader backup; do
	pid=$(pid_of "$role")
	[ -n "$pid" ] || { echo "no $role in apus status" >&2; exit 1; }
	args=()
	for t in /proc/"$pid"/task/*; do args+=(-p "${t##*/}"); done
	timeout -s INT "$secs" strace -c -q "${args[@]}" -o "$work/$role.strace" 2>/dev/null
	a=$(ticks "$pid")
	sleep "$secs"
	b=$(ticks "$pid")
	f=$work/$role.strace
	total=$(awk '$NF == "total" { print $4 }' "$f")
	top=$(awk '/^ *[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+/ && $NF != "total" { print $4, $NF }' "$f" |
		sort -rn | head -6 | awk -v s="$secs" '{ printf " %s=%.0f", $2, $1 / s }')
	awk -v role="$role" -v s="$secs" -v total="${total:-0}" -v cpu="$(((b - a) * 1000 / hz))" \
		-v top="$top" 'BEGIN { printf "%-6s syscalls/s %.0f  cpu ms/s %.1f  top:%s\n", role, total / s, cpu / s, top }'
done
