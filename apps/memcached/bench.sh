#!/usr/bin/env bash
# memcached throughput and latency, side by side in one run:
#   bare      one memcached (the ceiling; not replicated)
#   apus-shm  3 replicas under apus over shm (apps/memcached/cluster-shm.conf)
#   apus-tcp  3 replicas over tcp, each in its own network namespace
#             (apps/memcached/cluster-tcp.conf; skipped, saying so, without
#             root and ip netns)
# Each system runs memcached -t THREADS (default 4: the shipped configs'),
# and gets the same closed-loop client (build/bench/loadgen --proto
# memcached: C clients with one request outstanding each, all on one
# epoll thread): a set run then a get run of about SECS seconds each
# (default 8), sized from a short calibration run, over a key space of
# 10,000 keys of 64 B values.  Prints one markdown table: requests/s,
# p50/p99/p99.9 latency, CPU-seconds per 100k requests summed over the
# system's memcached processes (apus: all three, shim and coordinator
# included), and the throughput relative to bare.  After each apus run the
# replicas' digests are compared (apps/memcached/digest.py): "equal", or
# what differs.
#
#   apps/memcached/bench.sh [SECS]
#   APUS_MC_BENCH_SYSTEMS="bare apus-shm apus-tcp"   only these systems
#   APUS_MC_BENCH_THREADS=4  APUS_MC_BENCH_CLIENTS=50  APUS_MC_BENCH_SIZE=64
#   APUS_MC_BENCH_THREAD_ORDER=reads    thread_order of the apus systems
#                                        (default: the configs', requests)
#
# Ports 19960-19999 (bare 19960; shm app 19961-19963, admin 19970-19972;
# tcp app 19965, peer 19975, admin 19976 in namespaces apusmb0..2,
# 10.79.0.0/24, made and removed by this script).
set -euo pipefail
cd "$(dirname "$0")/../.."

secs=${1:-8}
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: apps/memcached/bench.sh [SECS]" >&2; exit 2; }
systems=${APUS_MC_BENCH_SYSTEMS:-bare apus-shm apus-tcp}
threads=${APUS_MC_BENCH_THREADS:-4}
clients=${APUS_MC_BENCH_CLIENTS:-50}
order=${APUS_MC_BENCH_THREAD_ORDER:-}
size=${APUS_MC_BENCH_SIZE:-64}
keyspace=10000
make -s all bench-bin
apus=build/bin/apus
loadgen=build/bench/loadgen
work=$(mktemp -d /tmp/apus-mc-bench-XXXXXX)
hz=$(getconf CLK_TCK)
export APUS_NETNS_PREFIX=apusmb APUS_NETNS_SUBNET=10.79.0
netns_made=0

declare -A conf host port
order_sed=()
[ -n "$order" ] && order_sed=(-e "s/^thread_order .*/thread_order = $order/")
bare_port=19960

# The shipped configs, moved to this script's ports and work directory;
# no guard and no checkpoints (nothing here crashes, and a dump's CPU
# would land in someone's run).
conf[apus-shm]=$work/shm.conf
sed -e "s#/tmp/apus-memcached/#$work/shm/#" -e 's/= 730\([123]\)$/= 1996\1/' \
	-e 's/1731{node}/1997{node}/' -e '/^metrics_port/d' -e 's/^guard .*/guard = off/' \
	-e '/^checkpoint_/d' -e 's/^cluster .*/cluster = mcbench-shm/' -e "s/ -t 4 / -t $threads /" \
	"${order_sed[@]}" apps/memcached/cluster-shm.conf >"${conf[apus-shm]}"
conf[apus-tcp]=$work/tcp.conf
sed -e "s#/tmp/apus-memcached-tcp/#$work/tcp/#" -e 's/= 7301$/= 19965/' -e 's/= 7320$/= 19975/' \
	-e 's/{address}:1731{node}/{address}:19976/' -e '/^metrics_port/d' -e '/^guard_port/d' \
	-e 's/^guard .*/guard = off/' -e '/^checkpoint_/d' -e 's/^cluster .*/cluster = mcbench-tcp/' \
	-e "s/10\.77\.0\./$APUS_NETNS_SUBNET./" -e "s/= apus\([0-9]\)$/= ${APUS_NETNS_PREFIX}\1/" \
	-e "s/ -t 4 / -t $threads /" "${order_sed[@]}" apps/memcached/cluster-tcp.conf >"${conf[apus-tcp]}"

pids_of() { # SYSTEM -> server pids
	local d
	case $1 in
	bare) cat "$work/bare.pid" ;;
	*) sed -n "s/^data_dir *= *//p" "${conf[$1]}" | while read -r d; do cat "$d/apus.pid"; done ;;
	esac
}

# shellcheck source=scripts/bench/cpu.sh
. scripts/bench/cpu.sh

start_system() {
	local s=$1 addr
	case $s in
	bare)
		memcached -p $bare_port -l 127.0.0.1:$bare_port -U 0 -t "$threads" -u root -m 64 -c 1024 3>&- &
		echo $! >"$work/bare.pid"
		host[$s]=127.0.0.1 port[$s]=$bare_port
		for _ in $(seq 50); do
			python3 apps/memcached/digest.py --port $bare_port --keys 1 >/dev/null 2>&1 && break
			sleep 0.1
		done
		;;
	apus-*)
		"$apus" start --config "${conf[$s]}" >/dev/null 3>&-
		addr=$("$apus" status --config "${conf[$s]}" --json | tr -d ' \t\r\n' |
			grep -o '{[^{}]*"role":"leader"[^{}]*}' | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
		host[$s]=${addr%:*} port[$s]=${addr##*:}
		;;
	esac
}

stop_system() {
	case $1 in
	bare) kill "$(cat "$work/bare.pid")" 2>/dev/null || true ;;
	apus-*) "$apus" stop --config "${conf[$1]}" >/dev/null 2>&1 3>&- || true ;;
	esac
}

# digests SYSTEM - "equal" when every replica's digest is the same (20 s to
# catch up), else each node's.
digests() {
	local s=$1 n h p d first="" all="" same deadline=$((SECONDS + 20))
	while :; do
		same=1 all="" first=""
		for n in 0 1 2; do
			h=$(awk -v n="$n" '/^\[node/{x=($2==n"]")} x&&/^address/{print $3}' "${conf[$s]}")
			[ -n "$h" ] || h=127.0.0.1
			if [ "$s" = apus-shm ]; then p=$((19970 + n)); else p=19976; fi
			d=$(timeout 60 python3 apps/memcached/digest.py --host "$h" --port "$p" --all 2>&1 | cut -c1-12,65-) || d="($d)"
			all+="node $n: $d; "
			[ -z "$first" ] && first=$d
			[ "$d" = "$first" ] || same=0
		done
		[ "$same" -eq 1 ] && { echo "equal"; return; }
		[ "$SECONDS" -ge "$deadline" ] && { echo "${all%; }"; return; }
		sleep 1
	done
}

cleanup() {
	local s
	for s in bare apus-shm apus-tcp; do stop_system "$s"; done
	sleep 0.5
	bash scripts/drop-regions.sh "$work"
	[ "$netns_made" -eq 1 ] && bash scripts/netns.sh down >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

if [[ " $systems " == *" apus-tcp "* ]]; then
	if [ "$(id -u)" -eq 0 ] && bash scripts/netns.sh up 3 >/dev/null 2>&1; then
		netns_made=1
	else
		echo "apus-tcp: skipped (needs root and ip netns)"
		systems=${systems/apus-tcp/}
	fi
fi

echo "memcached $(memcached -V | cut -d' ' -f2) -t $threads, apus $(sed -n 's/^thread_order *= *//p' "${conf[apus-shm]}" | sed 's/^/thread_order = /'); loadgen --proto memcached, $clients clients, $size B values, $keyspace keys, ~${secs} s per run; $(nproc) CPUs"
echo
echo "| system | op | requests | req/s | p50 µs | p99 µs | p99.9 µs | CPU s / 100k req | vs bare |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
declare -A bare_rps
notes=()
for s in $systems; do
	start_system "$s"
	mapfile -t pids < <(pids_of "$s")
	for op in set get; do
		lg=("$loadgen" --proto memcached --host "${host[$s]}" --port "${port[$s]}" --op "$op"
			--clients "$clients" --size "$size" --keyspace "$keyspace")
		# Calibration (and, for set, the keys the gets will find).
		cal_n=5000
		[ "$op" = set ] && cal_n=20000
		cal=$("${lg[@]}" --requests "$cal_n" 2>&1 | tail -n 1) || true
		[[ "$cal" =~ rps=([0-9]+) ]] || { echo "$s $op: calibration failed: $cal" >&2; exit 1; }
		n=$((BASH_REMATCH[1] * secs))
		[ "$n" -lt 5000 ] && n=5000
		c0=$(cpu_ticks "${pids[@]}")
		line=$("${lg[@]}" --requests "$n" --seed 2 2>&1 | tail -n 1) || true
		c1=$(cpu_ticks "${pids[@]}")
		[[ "$line" =~ n=([0-9]+).*rps=([0-9]+).*p50_us=([0-9.]+).*p99_us=([0-9.]+).*p999_us=([0-9.]+).*errors=([0-9]+) ]] ||
			{ echo "$s $op: loadgen failed: $line" >&2; exit 1; }
		got=${BASH_REMATCH[1]} rps=${BASH_REMATCH[2]} p50=${BASH_REMATCH[3]} p99=${BASH_REMATCH[4]}
		p999=${BASH_REMATCH[5]} errs=${BASH_REMATCH[6]}
		[ "$errs" -eq 0 ] || notes+=("$s $op: $errs errors (failed requests or connections; the run stops early when a client's connection fails 5 times)")
		cpu=$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$got" 'BEGIN { printf "%.2f", n ? t / hz / n * 100000 : 0 }')
		[ "$s" = bare ] && bare_rps[$op]=$rps
		ratio="—"
		[ -n "${bare_rps[$op]:-}" ] && ratio=$(awk -v a="$rps" -v b="${bare_rps[$op]}" 'BEGIN { printf "%.1f %%", 100 * a / b }')
		echo "| $s | $op | $got | $rps | ${p50%.*} | ${p99%.*} | ${p999%.*} | $cpu | $ratio |"
	done
	if [ "$s" != bare ]; then
		notes+=("$s: replicas' digests after the run: $(digests "$s")")
		views=$("$apus" status --config "${conf[$s]}" --json | tr -d ' \t\r\n' | grep -o '"view":[0-9]*' | head -n 1)
		[ "$views" = '"view":0' ] || notes+=("$s: the leader changed during the run (${views/\"view\":/view }): $(grep -h 'suspected\|won view' "$work"/"${s#apus-}"/node*/apus.log | head -n 3 | tr '\n' ' ')")
	fi
	stop_system "$s"
	sleep 1
done
echo
for m in "${notes[@]}"; do echo "- $m"; done
