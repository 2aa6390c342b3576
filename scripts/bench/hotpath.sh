#!/usr/bin/env bash
# The leader's hot path against the bare server (issue 29), in one run,
# interleaved round by round so that drift hits all systems alike:
#
#   scripts/bench/hotpath.sh [ROUNDS]          default 3 rounds
#
# Systems, each started fresh for every run:
#   bare        one redis-server
#   apus        3 replicas under apus, shm, commit_wait = read (the default)
#   apus-reply  the same with commit_wait = reply
#   apus-machine (ask for it in HOTPATH_SYSTEMS) the default configuration
#               with randomness = machine and no seed_function: what
#               randomness as an input costs (Redis's init_genrand64 each entry)
#   base        (only with HOTPATH_BASE=/path/to/other/build/bin/apus) the
#               default configuration on another build, e.g. a worktree of
#               the previous commit: a before/after in the same run
#   base-reply  (ask for it in HOTPATH_SYSTEMS, with HOTPATH_BASE) that
#               build with commit_wait = reply
# Workloads (redis-benchmark, 50 clients, 64 B values, 100k keys):
#   set, get (keys written first), set-p16 (pipelined by 16); then
#   memcached -t 4 bare and under apus (build/bench/loadgen, 50 clients).
# Each line: throughput, p50/p99 (ms), the CPU the serving process (the
# leader's server, all its threads: utime + stime from /proc/PID/stat)
# spent per request, in microseconds, and its minor page faults per 1000
# requests; then a table of ratios to bare.
#
# The clusters are apps/*/cluster-shm.conf with guard off and no
# snapshot_cmd: the hot path alone (recovery points cost apart, see
# BENCHMARKS.md).  Runs should last 10 s or more: HOTPATH_N requests per
# run (default 1,500,000: about 10 s at 150k/s).
#   HOTPATH_N=N  HOTPATH_MC_N=N (memcached's runs; default HOTPATH_N)
#   HOTPATH_P16_N=N (set-p16's runs: pipelined requests go ~5x as fast;
#   default 4 x HOTPATH_N)
#   HOTPATH_WORKLOADS="set get set-p16 mc-set"
#   HOTPATH_SYSTEMS="bare apus apus-reply"  HOTPATH_OUT=FILE (raw lines)
#   HOTPATH_APUS=path/to/apus (default build/bin/apus)
#   HOTPATH_PERF=DIR: perf record (dwarf call graphs) the leader of the
#   first apus run of each workload, 5 s of it, and write DIR/WORKLOAD.txt
#   (perf report, by symbol, self and with children)
#   HOTPATH_STAT=1: perf stat the serving process over each whole run and
#   add syscalls and context switches per request (counts, not times: they
#   hold on shared cores where CPU time drifts), and instructions per
#   request (user, kernel) where the machine has hardware counters
#   HOTPATH_PIN="LEADER BACKUP1 BACKUP2 CLIENT": CPU lists (taskset -c) for
#   the leader's process (bare: the server), each backup's, and the load
#   client, e.g. "0-1 2-3 4-5 8-11": each replica on cores of its own
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
case ${1:-} in -h | --help) sed -n '2,46p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
rounds=${1:-3}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/bench/hotpath.sh [ROUNDS] (--help)" >&2; exit 2; }
n=${HOTPATH_N:-1500000}
mc_n=${HOTPATH_MC_N:-$n}
p16_n=${HOTPATH_P16_N:-$((4 * n))}
workloads=${HOTPATH_WORKLOADS:-set get set-p16 mc-set}
systems=${HOTPATH_SYSTEMS:-bare apus apus-reply}
[ -n "${HOTPATH_BASE:-}" ] && [[ " $systems " != *" base "* ]] && systems="$systems base"
apus=${HOTPATH_APUS:-build/bin/apus}
loadgen=${HOTPATH_LOADGEN:-build/bench/loadgen}
[ -x "$apus" ] && [ -x "$loadgen" ] || make -s all bench-bin || exit 1
work=$(mktemp -d /tmp/apus-hotpath-XXXXXX)
raw=${HOTPATH_OUT:-$work/raw.txt}
: >"$raw"
declare -A perf_done
cleanup() {
	redis-cli -p 7380 shutdown nosave >/dev/null 2>&1
	pkill -f "memcached -p 7370" 2>/dev/null
	for c in "$work"/*.conf; do [ -f "$c" ] && "$apus" stop --config "$c" >/dev/null 2>&1; done
	bash scripts/drop-regions.sh "$work" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# cpu_ticks PID: utime + stime of every thread of PID, in clock ticks.
cpu_ticks() { cut -d')' -f2- "/proc/$1/stat" | awk '{print $12 + $13}'; }
# minor_faults PID: page faults of every thread of PID served without I/O.
minor_faults() { cut -d')' -f2- "/proc/$1/stat" | awk '{print $8}'; }
hz=$(getconf CLK_TCK)

read -r pin_leader pin_b1 pin_b2 pin_client <<<"${HOTPATH_PIN:-}"
# pin LIST PID: every thread of PID onto the CPUs of LIST (no LIST: no-op).
pin() { [ -z "$1" ] || taskset -a -c -p "$1" "$2" >/dev/null; }
# client CMD...: the load client, on its CPUs where HOTPATH_PIN says.
client() { if [ -n "$pin_client" ]; then taskset -c "$pin_client" "$@"; else "$@"; fi; }

# cluster_conf APP BIN EXTRA: a 3-replica shm config under $work, guard off,
# no snapshots; prints its path.
cluster_conf() {
	local app=$1 extra=$2 conf=$work/$1-$RANDOM.conf
	sed -e "s#/tmp/apus-demo#$work/$app#; s#/tmp/apus-memcached#$work/$app#" \
		-e "s/= 700\([123]\)/= 739\1/; s/= 701\([123]\)/= 749\1/" \
		-e "s/= 730\([123]\)/= 739\1/; s/= 731\([123]\)/= 749\1/; s/1731{node}/1741{node}/g" \
		-e "s/^guard .*/guard = off/; /^snapshot_/d" -e "s#{config_dir}#$PWD/apps/$app#g" \
		"apps/$app/cluster-shm.conf" >"$conf"
	[ -n "$extra" ] && echo "$extra" | sed -i "/^transport/r /dev/stdin" "$conf"
	[[ $extra == *"randomness = machine"* ]] && sed -i "/^seed_function/d" "$conf"
	echo "$conf"
}

leader_addr() { # BIN CONF
	"$1" status --config "$2" --json | tr -d ' \t\r\n' |
		grep -o '{[^{}]*"role":"leader"[^{}]*}' | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4
}

# load PORT WORKLOAD: the client's run; prints "rps p50_ms p99_ms".
load() {
	local port=$1 w=$2 out
	case $w in
	set | get | set-p16)
		local t=${w%-p16} p=1 count=$n
		[ "$w" = set-p16 ] && p=16 count=$p16_n
		out=$(client redis-benchmark -p "$port" -c 50 -n "$count" -d 64 -r 100000 -P "$p" -t "$t" --csv -q 2>/dev/null |
			tail -n 1 | tr -d '"')
		IFS=, read -r _ rps _ _ p50 _ p99 _ <<<"$out"
		echo "${rps%.*} $p50 $p99" ;;
	mc-set)
		out=$(client "$loadgen" --proto memcached --host 127.0.0.1 --port "$port" --clients 50 \
			--requests "$mc_n" --op set --size 64 2>&1 | tail -n 1)
		awk '{for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		     printf "%d %.3f %.3f\n", v["rps"], v["p50_us"] / 1000, v["p99_us"] / 1000}' <<<"$out" ;;
	esac
}

# measure SYSTEM WORKLOAD PORT PID: one run; appends its line to $raw.
measure() {
	local sys=$1 w=$2 port=$3 pid=$4 t0 t1 f0 f1 res perf_pid= reqs=$n
	[[ $w == mc-* ]] && reqs=$mc_n
	[ "$w" = set-p16 ] && reqs=$p16_n
	[ "$w" = get ] && client redis-benchmark -p "$port" -c 50 -n 100000 -d 64 -r 100000 -t set -q >/dev/null 2>&1
	if [ -n "${HOTPATH_PERF:-}" ] && [ -z "${perf_done[$w]:-}" ] && [ "$sys" = apus ]; then
		perf_done[$w]=1
		mkdir -p "$HOTPATH_PERF"
		(sleep 2; perf record -F 499 --call-graph dwarf,8192 -p "$pid" -o "$work/$w.perf" -- sleep 5 >/dev/null 2>&1) &
		perf_pid=$!
	fi
	local stat_pid= stat_out=$work/stat.txt stats=""
	if [ -n "${HOTPATH_STAT:-}" ]; then
		perf stat -x, -e raw_syscalls:sys_enter,context-switches,instructions:u,instructions:k \
			-p "$pid" -o "$stat_out" &
		stat_pid=$!
		sleep 0.2
	fi
	t0=$(cpu_ticks "$pid")
	f0=$(minor_faults "$pid")
	res=$(load "$port" "$w")
	t1=$(cpu_ticks "$pid")
	f1=$(minor_faults "$pid")
	if [ -n "$stat_pid" ]; then
		kill -INT "$stat_pid"; wait "$stat_pid" 2>/dev/null
		stats=$(awk -F, -v n="$reqs" '$3 == "raw_syscalls:sys_enter" { s = $1 } $3 == "context-switches" { c = $1 }
			$3 ~ /^instructions:u/ && $1 ~ /^[0-9]+$/ { iu = $1 } $3 ~ /^instructions:k/ && $1 ~ /^[0-9]+$/ { ik = $1 }
			END { printf " syscalls_per_req=%.2f csw_per_req=%.3f", s / n, c / n
			      if (iu) printf " uinsn_per_req=%d kinsn_per_req=%d", iu / n, ik / n }' "$stat_out")
	fi
	[ -n "$perf_pid" ] && wait "$perf_pid"
	if [ -f "$work/$w.perf" ]; then
		{ perf report -i "$work/$w.perf" --no-children --sort dso --stdio -g none 2>/dev/null | grep '%' | head -n 12
		  echo; perf report -i "$work/$w.perf" --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep '%' | head -n 80
		  echo; perf report -i "$work/$w.perf" --children --sort sym --stdio -g none 2>/dev/null | grep '%' | head -n 120
		  echo; perf report -i "$work/$w.perf" --no-children --sort sym --stdio -G --percent-limit 1.5 2>/dev/null | head -n 600
		} >"$HOTPATH_PERF/$w.txt"
		rm -f "$work/$w.perf"
	fi
	read -r rps p50 p99 <<<"$res"
	printf "%-4s %-11s %-8s rps=%s p50_ms=%s p99_ms=%s cpu_us_per_req=%s faults_per_kreq=%s%s\n" \
		"$round" "$sys" "$w" "${rps:-0}" "${p50:-?}" "${p99:-?}" \
		"$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.2f", d / hz * 1e6 / n }')" \
		"$(awk -v d=$((f1 - f0)) -v n="$reqs" 'BEGIN { printf "%.1f", d * 1000 / n }')" "$stats" | tee -a "$raw"
}

run_one() { # SYSTEM WORKLOAD
	local sys=$1 w=$2 app=redis bin=$apus extra="" conf addr pid
	[[ $w == mc-* ]] && app=memcached
	case $sys in
	bare)
		if [ $app = redis ]; then
			redis-server --port 7380 --save "" --appendonly no --daemonize yes --logfile "$work/bare.log" >/dev/null
			until redis-cli -p 7380 ping >/dev/null 2>&1; do sleep 0.05; done
			local bpid
			bpid=$(pgrep -f 'redis-server .*:7380' | head -n 1)
			pin "$pin_leader" "$bpid"
			measure bare "$w" 7380 "$bpid"
			redis-cli -p 7380 shutdown nosave >/dev/null 2>&1
		else
			# shellcheck disable=SC2046
			memcached -p 7370 -l 127.0.0.1 -U 0 -t 4 -m 64 -c 1024 $([ "$(id -u)" = 0 ] && echo -u root) &
			local mpid=$!
			sleep 0.3
			pin "$pin_leader" "$mpid"
			measure bare "$w" 7370 "$mpid"
			kill "$mpid"; wait "$mpid" 2>/dev/null
		fi
		return ;;
	apus-reply) extra="commit_wait = reply" ;;
	apus-machine) extra="randomness = machine" ;;
	base) bin=$HOTPATH_BASE ;;
	base-reply) bin=$HOTPATH_BASE extra="commit_wait = reply" ;;
	esac
	conf=$(cluster_conf "$app" "$extra")
	"$bin" start --config "$conf" >/dev/null || { echo "$sys: apus start failed" >&2; return; }
	addr=$(leader_addr "$bin" "$conf")
	pid=$(cat "$work/$app/node0/apus.pid")
	pin "$pin_leader" "$pid"
	pin "$pin_b1" "$(cat "$work/$app/node1/apus.pid")"
	pin "$pin_b2" "$(cat "$work/$app/node2/apus.pid")"
	measure "$sys" "$w" "${addr##*:}" "$pid"
	"$bin" stop --config "$conf" >/dev/null
	bash scripts/drop-regions.sh "$work/$app" 2>/dev/null
	rm -rf "${work:?}/$app" "$conf"
}

for ((round = 1; round <= rounds; round++)); do
	for w in $workloads; do
		for s in $systems; do
			run_one "$s" "$w"
		done
	done
done

# Ratios to bare, per workload and round: throughput and CPU per request.
echo
echo "ratios to bare in the same round: throughput (higher is better) / leader CPU per request (lower is better)"
awk '{ split($4, a, "="); split($7, c, "="); k = $2 " " $3; rps[$1, k] = a[2]; cpu[$1, k] = c[2]
       sys[$2] = 1; wl[$3] = 1; r[$1] = 1 }
     END { for (w in wl) for (s in sys) { if (s == "bare") continue
             line = ""; for (i in r) if ((i, "bare " w) in rps && (i, s " " w) in rps && rps[i, "bare " w] > 0)
               line = line sprintf(" %.2f/%.2f", rps[i, s " " w] / rps[i, "bare " w], cpu[i, s " " w] / cpu[i, "bare " w])
             if (line != "") printf "%-8s %-11s%s\n", w, s, line } }' "$raw" | sort
