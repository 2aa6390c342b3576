#!/usr/bin/env bash
# clamd throughput and latency, bare against apus, side by side in one run:
#   bare      one clamd (the ceiling; not replicated)
#   apus-shm  3 replicas under apus over shm (apps/clamav/cluster-shm.conf,
#             guard off: nothing here crashes)
#   apus-tcp  3 replicas over tcp, each in its own network namespace
#             (apps/clamav/cluster-tcp.conf; skipped, saying so, without
#             root and ip netns)
# ROUNDS rounds (default 3), each running bare then the apus systems with the same
# load: apps/clamav/workload.py --stats, CLIENTS clients (20) of SCANS
# INSTREAM scans each (50; a fifth of them in sessions), payloads of
# SIZE..2*SIZE bytes (16384).  Prints one markdown table: scans/s, p50 and
# p99 latency of single scans, CPU-seconds per 1,000 scans summed over the
# system's clamd processes (apus: all three, shim and coordinator
# included, until `apus verify` finds the backups caught up and equal, or
# the run fails), and throughput relative to the round's bare run.
#
#   apps/clamav/bench.sh [ROUNDS]
#   APUS_CLAM_BENCH_CLIENTS=20 APUS_CLAM_BENCH_SCANS=50 APUS_CLAM_BENCH_SIZE=16384
#
# Ports 19920-19939 (bare 19921; shm 19931-19933; tcp app 19925, peer
# 19926, guard 19927 in namespaces apuscb0..2, 10.81.0.0/24, made and
# removed by this script).
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=${1:-3}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "usage: apps/clamav/bench.sh [ROUNDS]" >&2; exit 2; }
clients=${APUS_CLAM_BENCH_CLIENTS:-20}
scans=${APUS_CLAM_BENCH_SCANS:-50}
size=${APUS_CLAM_BENCH_SIZE:-16384}
[ -x /usr/sbin/clamd ] || { echo "bench.sh: /usr/sbin/clamd not found (apt-get install clamav-daemon)" >&2; exit 1; }
make -s all
apus=build/bin/apus
py=/usr/bin/python3
hz=$(getconf CLK_TCK)
# shellcheck source=scripts/bench/app-bench.bash
. scripts/bench/app-bench.bash
app_bench_setup clamav 19930 19920 apuscb 10.81.0

# bare: a one-node config, only for init.sh's clamd.conf.
printf '[node 0]\naddress = 127.0.0.1\napp_port = 19921\ndata_dir = %s/bare\n' "$work" >"$work/bare.conf"
apps/clamav/init.sh --config "$work/bare.conf" --force >/dev/null
for s in $systems; do apps/clamav/init.sh --config "${conf[$s]}" --force >/dev/null; done

# serving HOST PORT - clamd answers PING there.
serving() {
	[ "$("$py" -c 'import sys; sys.path.insert(0, "apps/clamav"); import clamd_client as cc
print(cc.ask(sys.argv[1], int(sys.argv[2]), b"PING", timeout=2))' "$1" "$2" 2>/dev/null)" = PONG ]
}

# run_load NAME HOST PORT PID... - one workload run; a table row.
run_load() {
	local name=$1 h=$2 p=$3 out t0 t1 rate p50 p99 n
	shift 3
	t0=$(cpu_ticks "$@")
	out=$("$py" apps/clamav/workload.py --host "$h" --port "$p" --clients "$clients" --scans "$scans" \
		--size "$size" --seed "$round" --stats) || { echo "$out" >&2; return 1; }
	# The backups' replay counts too: verify waits until they answered.
	if [ "$name" != bare ]; then
		"$apus" verify --config "${conf[$name]}" --timeout 60000 >"$work/verify.out" 2>&1 ||
			{ echo "bench.sh: apus verify failed:" >&2; cat "$work/verify.out" >&2; return 1; }
	fi
	t1=$(cpu_ticks "$@")
	read -r rate p50 p99 n < <(sed -n 's/^stats: \([0-9]*\) scans\/s, single scans p50 \([0-9.]*\) ms, p99 \([0-9.]*\) ms (\([0-9]*\) scans.*/\1 \2 \3 \4/p' <<<"$out")
	ROW_RATE=$rate
	ROW="| $round | $name | $rate | $p50 | $p99 | $(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.2f", t / hz / n * 1000 }')"
}

echo "clamd $(dpkg-query -W -f='${Version}' clamav-daemon 2>/dev/null), $(nproc) cores; $clients clients x $scans scans of ${size}-$((2 * size)) B"
echo
echo "| round | system | scans/s | p50 ms | p99 ms | CPU s / 1k scans | vs bare |"
echo "|---|---|---|---|---|---|---|"
for ((round = 1; round <= rounds; round++)); do
	/usr/sbin/clamd -c "$work/bare/clamd.conf" >"$work/bare.log" 2>&1 &
	bare_pid=$!
	wait_serving 127.0.0.1 19921
	run_load bare 127.0.0.1 19921 "$bare_pid"
	bare_rate=$ROW_RATE
	echo "$ROW | 1.00 |"
	kill "$bare_pid"
	wait "$bare_pid" 2>/dev/null || true
	bare_pid=

	for s in $systems; do
		"$apus" start --config "${conf[$s]}" >"$work/start.log" 2>&1 || { cat "$work/start.log" >&2; exit 1; }
		wait_serving "${host[$s]}" "${port[$s]}"
		mapfile -t pids < <(cat "$work/${s#apus-}"/node*/apus.pid)
		run_load "$s" "${host[$s]}" "${port[$s]}" "${pids[@]}"
		echo "$ROW | $(awk -v a="$ROW_RATE" -v b="$bare_rate" 'BEGIN { printf "%.2f", a / b }') |"
		"$apus" stop --config "${conf[$s]}" >/dev/null 2>&1
		apps/clamav/init.sh --config "${conf[$s]}" --force >/dev/null
	done
done
