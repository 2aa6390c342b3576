#!/usr/bin/env bash
# The benchmark suite: in one run on one machine, side by side and
# interleaved (every round runs each workload on every system in turn, so
# drift hits all alike), what a user could pick for a consistent replicated
# key-value store:
#   bare        one redis-server (the ceiling; not replicated)
#   apus        3 replicas of redis-server under apus, shm, commit_wait = read
#   apus-reply  the same with commit_wait = reply (output commit)
#   apus-perread  apus with read_ahead = off: one commit wait per read()
#   apus-sockets  apus with read_ahead = off and replay_in_place = off:
#               also every replayed byte through a loopback socket (the
#               path before both optimisations)
#   apus-ondisk   apus with region_dir = none: the region is a disk file
#               written back by msync (the durable log before the apus.wal
#               copy)
#   (the last three only when named in APUS_BENCH_SYSTEMS: every cluster
#   started adds its idle heartbeats to the machine the others run on)
#   apus-tcp    3 replicas over tcp, each in its own network namespace
#               (loopback addresses where namespaces are unavailable)
#   redis-wait  redis primary + 2 replicas, the client sends WAIT 2 0 after
#               every write (what Redis users do for synchronous replication)
#   etcd        3 etcd members (Debian's etcd-server), v3 JSON gateway
# Workloads: set and get, 1 and 50 clients, 64 B and 4 KB values, with the
# same closed-loop client for all (build/bench/loadgen).  Reports
# throughput, p50/p99/p99.9 latency and CPU-seconds per 100k requests summed
# over the system's server processes; writes the tables and PNG plots
# (gnuplot) to OUT; then the consensus microbenchmark (64 B, 1 KB, 16 KB
# entries; 1-8 proposers; shm and tcp) next to the ping-pong floors.
#
#   scripts/bench.sh [ROUNDS]       default 3 rounds (make bench)
#   APUS_BENCH_SYSTEMS="bare apus"  only these systems
#   APUS_BENCH_N=20000              requests per 50-client run (1 client: N/4)
#   APUS_BENCH_OUT=DIR              where results go (default scripts/bench/results)
#   APUS_BENCH_OPS="set get"  APUS_BENCH_CLIENTS="50 1"  APUS_BENCH_SIZES="64 4096"
#                                   only these workloads
#   APUS_BENCH_CONSENSUS=0          skip the consensus microbenchmark
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/bench.sh [ROUNDS]" >&2; exit 2; }
systems=${APUS_BENCH_SYSTEMS:-bare apus apus-reply apus-tcp redis-wait etcd}
n50=${APUS_BENCH_N:-20000}
n1=$((n50 / 4))
keyspace=10000
out=${APUS_BENCH_OUT:-scripts/bench/results}
make -s all bench-bin
apus=build/bin/apus
loadgen=build/bench/loadgen
work=$(mktemp -d /tmp/apus-bench-XXXXXX)
mkdir -p "$out" "$work/cdf"
hz=$(getconf CLK_TCK)

# ---- the systems -----------------------------------------------------------
declare -A host port conf
bare_port=7290
shm_conf() { # NAME PORTDIGIT EXTRA-LINE
	sed -e "s#/tmp/apus-demo#$work/$1#" -e "s/= 700\([123]\)/= 7$2\1/" \
		-e "s/^fsync .*/fsync = batch\n$3/" -e "s/^guard .*/guard = off/" apps/redis/cluster-shm.conf >"$work/$1.conf"
	echo "$work/$1.conf"
}
conf[apus]=$(shm_conf apus 28 "")
conf[apus-reply]=$(shm_conf apus-reply 38 "commit_wait = reply")
conf[apus-perread]=$(shm_conf apus-perread 48 "read_ahead = off")
conf[apus-sockets]=$(shm_conf apus-sockets 68 "read_ahead = off\nreplay_in_place = off")
conf[apus-ondisk]=$(shm_conf apus-ondisk 78 "region_dir = none")
conf[apus-tcp]=$work/apus-tcp.conf
sed -e "s#/tmp/apus-demo-tcp#$work/tcp#" -e 's/= 7100$/= 7580/' -e 's/= 7110$/= 7590/' \
	-e 's/^fsync .*/fsync = batch/' -e 's/^guard .*/guard = off/' apps/redis/cluster-tcp.conf >"${conf[apus-tcp]}"
tcp_where="each replica in its own network namespace"
if ! { [ "$(id -u)" -eq 0 ] && bash scripts/netns.sh up 3 >/dev/null 2>&1; }; then
	bash scripts/netns.sh loopback "${conf[apus-tcp]}" >"$work/lo.conf"
	mv "$work/lo.conf" "${conf[apus-tcp]}"
	tcp_where="loopback addresses (no network namespaces here)"
fi

redis_args=(--save "" --appendonly no --daemonize yes)
etcd_members=3

pids_of() { # SYSTEM -> server pids
	local s=$1 i
	case $s in
	bare) cat "$work/bare.pid" ;;
	apus*) for i in $(sed -n 's/^data_dir *= *//p' "${conf[$s]}"); do cat "$i/apus.pid"; done ;;
	redis-wait) cat "$work"/wait-*.pid ;;
	etcd) cat "$work"/etcd-*.pid ;;
	esac
}

# shellcheck source=scripts/bench/cpu.sh
. scripts/bench/cpu.sh

start_systems() {
	local s i
	for s in $systems; do
		case $s in
		bare)
			redis-server --port $bare_port --bind 127.0.0.1 "${redis_args[@]}" --dir "$work" \
				--logfile "$work/bare.log" --pidfile "$work/bare.pid" >/dev/null
			host[$s]=127.0.0.1 port[$s]=$bare_port
			;;
		apus | apus-perread | apus-sockets | apus-ondisk | apus-reply | apus-tcp)
			"$apus" start --config "${conf[$s]}" >/dev/null
			local addr
			addr=$("$apus" status --config "${conf[$s]}" --json | tr -d ' \t\r\n' |
				grep -o '{[^{}]*"role":"leader"[^{}]*}' | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
			host[$s]=${addr%:*} port[$s]=${addr##*:}
			;;
		redis-wait)
			for i in 1 2 3; do
				local extra=()
				[ "$i" -gt 1 ] && extra=(--replicaof 127.0.0.1 7601)
				redis-server --port "760$i" --bind 127.0.0.1 "${redis_args[@]}" --dir "$work" \
					--dbfilename "wait-$i.rdb" --logfile "$work/wait-$i.log" \
					--pidfile "$work/wait-$i.pid" "${extra[@]}" >/dev/null
			done
			for _ in $(seq 100); do
				[ "$(redis-cli -p 7601 INFO replication | tr -d '\r' | grep -c '^slave[0-9]*:.*state=online')" -eq 2 ] && break
				sleep 0.1
			done
			host[$s]=127.0.0.1 port[$s]=7601
			;;
		etcd)
			local cluster="" 
			for i in $(seq 1 $etcd_members); do
				cluster+="${cluster:+,}e$i=http://127.0.0.1:771$i"
			done
			for i in $(seq 1 $etcd_members); do
				etcd --name "e$i" --data-dir "$work/etcd-$i" --log-level error --logger zap \
					--listen-client-urls "http://127.0.0.1:770$i" \
					--advertise-client-urls "http://127.0.0.1:770$i" \
					--listen-peer-urls "http://127.0.0.1:771$i" \
					--initial-advertise-peer-urls "http://127.0.0.1:771$i" \
					--initial-cluster "$cluster" --initial-cluster-state new \
					>"$work/etcd-$i.log" 2>&1 &
				echo $! >"$work/etcd-$i.pid"
			done
			for _ in $(seq 100); do
				ETCDCTL_API=3 etcdctl --endpoints http://127.0.0.1:7701 endpoint health >/dev/null 2>&1 && break
				sleep 0.2
			done
			host[$s]=127.0.0.1 port[$s]=7701
			;;
		esac
	done
}

stop_systems() {
	local s p
	for s in apus apus-perread apus-sockets apus-ondisk apus-reply apus-tcp; do
		"$apus" stop --config "${conf[$s]}" >/dev/null 2>&1 || true
	done
	for p in $(cat "$work"/bare.pid "$work"/wait-*.pid "$work"/etcd-*.pid 2>/dev/null); do
		kill "$p" 2>/dev/null || true
	done
	sleep 0.5
}
cleanup() {
	stop_systems
	bash scripts/drop-regions.sh "$work"
	rm -rf "$work"
}
trap cleanup EXIT

# Drop systems this machine cannot run, saying why.
avail=()
for s in $systems; do
	if [ "$s" = etcd ] && ! { command -v etcd && command -v etcdctl; } >/dev/null; then
		echo "etcd: skipped (not installed: apt-get install etcd-server etcd-client)"
		continue
	fi
	avail+=("$s")
done
systems="${avail[*]}"
start_systems
echo "systems: $systems"
echo "apus-tcp: $tcp_where"

# ---- the workloads, interleaved -----------------------------------------------
csv=$work/results.csv
echo "round,system,op,clients,size,n,rps,p50_us,p99_us,p999_us,cpu_s_per_100k,errors" >"$csv"
for size in ${APUS_BENCH_SIZES:-64 4096}; do
	for op in ${APUS_BENCH_OPS:-set get}; do
		for clients in ${APUS_BENCH_CLIENTS:-50 1}; do
			n=$([ "$clients" -eq 50 ] && echo "$n50" || echo "$n1")
			for ((r = 0; r < rounds; r++)); do
				for s in $systems; do
					proto=redis
					[ "$s" = redis-wait ] && [ "$op" = set ] && proto=redis-wait
					[ "$s" = etcd ] && proto=etcd
					mapfile -t pids < <(pids_of "$s")
					c0=$(cpu_ticks "${pids[@]}")
					line=$("$loadgen" --proto "$proto" --host "${host[$s]}" --port "${port[$s]}" \
						--op "$op" --clients "$clients" --requests "$n" --size "$size" \
						--keyspace "$keyspace" --seed $((r + 1)) \
						--cdf "$work/cdf/$s-$op-$clients-$size.txt" 2>&1 | tail -n 1) || true
					c1=$(cpu_ticks "${pids[@]}")
					kv() { grep -o " $1=[^ ]*" <<<" $line" | cut -d= -f2; }
					cpu=$(awk -v d=$((c1 - c0)) -v hz="$hz" -v n="$(kv n)" \
						'BEGIN { printf "%.3f", (n > 0 ? d / hz * 100000 / n : 0) }')
					echo "$r,$s,$op,$clients,$size,$(kv n),$(kv rps),$(kv p50_us),$(kv p99_us),$(kv p999_us),$cpu,$(kv errors)" >>"$csv"
					printf '  %-10s %s c=%-2s %5s B  %s\n' "$s" "$op" "$clients" "$size" "$line" >&2
				done
			done
		done
	done
done
stop_systems

# ---- tables ------------------------------------------------------------------
# medians.tsv: op clients size system rps vs_bare p50 p99 p999 cpu
awk -F, -v systems="$systems" '
	NR == 1 { next }
	{ k = $3 "|" $4 "|" $5 "|" $2; c = ++cnt[k]
	  rps[k, c] = $7; p50[k, c] = $8; p99[k, c] = $9; p999[k, c] = $10; cpu[k, c] = $11 }
	function med(a, k, n,   i, j, t, v) {
		for (i = 1; i <= n; i++) v[i] = a[k, i] + 0
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		return v[int((n + 1) / 2)]
	}
	END {
		ns = split(systems, sys, " ")
		split("set get", ops, " "); split("64 4096", sizes, " "); split("1 50", cls, " ")
		for (z = 1; z <= 2; z++) for (o = 1; o <= 2; o++) for (c = 1; c <= 2; c++) {
			bk = ops[o] "|" cls[c] "|" sizes[z] "|bare"
			b = cnt[bk] ? med(rps, bk, cnt[bk]) : 0
			for (i = 1; i <= ns; i++) {
				k = ops[o] "|" cls[c] "|" sizes[z] "|" sys[i]
				if (!cnt[k]) continue
				r = med(rps, k, cnt[k])
				printf "%s\t%s\t%s\t%s\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%.2f\n", ops[o], cls[c], sizes[z],
				       sys[i], r, b ? sprintf("%.2f", r / b) : "-", med(p50, k, cnt[k]),
				       med(p99, k, cnt[k]), med(p999, k, cnt[k]), med(cpu, k, cnt[k])
			}
		}
	}' "$csv" >"$work/medians.tsv"

summary=$out/summary.md
{
	echo "Command: \`scripts/bench.sh $rounds\` ($(date -u +%Y-%m-%d), $(nproc) cores, kernel $(uname -r));"
	echo "median of $rounds interleaved rounds; requests per run: $n50 (50 clients), $n1 (1 client);"
	echo "keys uniform over $keyspace; apus-tcp: $tcp_where; CPU = utime + stime of the system's server processes."
	echo
	echo "| op | clients | value | system | req/s | vs bare | p50 µs | p99 µs | p99.9 µs | CPU-s / 100k req |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	awk -F'\t' '{ printf "| %s | %s | %s B | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }' \
		"$work/medians.tsv"
} >"$summary"
cp "$csv" "$out/results.csv"
cat "$summary"

# ---- plots -----------------------------------------------------------------------
if command -v gnuplot >/dev/null; then
	# Throughput bars: one cluster per workload, one bar per system.
	awk -F'\t' -v systems="$systems" '
		{ w = $1 "-" $2 "c-" $3 "B"; if (!(w in seen)) { seen[w] = 1; name[++nw] = w }; v[w, $4] = $5 }
		END { ns = split(systems, s, " "); printf "workload"; for (i = 1; i <= ns; i++) printf " %s", s[i]; print ""
		      for (j = 1; j <= nw; j++) { printf "%s", name[j]
			for (i = 1; i <= ns; i++) printf " %s", ((name[j], s[i]) in v) ? v[name[j], s[i]] : 0; print "" } }' \
		"$work/medians.tsv" >"$work/bars.dat"
	ncol=$(head -n 1 "$work/bars.dat" | wc -w)
	gnuplot <<EOF
set terminal pngcairo size 1200,500 noenhanced
set output "$out/throughput.png"
set title "requests/s (median of $rounds rounds; log scale)"
set style data histogram
set style histogram cluster gap 1
set style fill solid border -1
set logscale y
set key outside right
set xtics rotate by -30
plot for [i=2:$ncol] "$work/bars.dat" using i:xtic(1) title columnheader(i)
EOF
	for op in set get; do
		for clients in 1 50; do
			for size in 64 4096; do
				plots=""
				for s in $systems; do
					f="$work/cdf/$s-$op-$clients-$size.txt"
					[ -s "$f" ] && plots+="${plots:+, }\"$f\" using 1:2 with lines lw 2 title \"$s\""
				done
				[ -n "$plots" ] || continue
				gnuplot <<EOF
set terminal pngcairo size 800,500 noenhanced
set output "$out/cdf-$op-$clients-$size.png"
set title "latency CDF: $op, $clients client(s), $size B values (last round)"
set logscale x
set xlabel "latency (us)"
set ylabel "fraction of requests"
set key bottom right
set grid
plot $plots
EOF
			done
		done
	done
	echo "plots: $out/throughput.png, $out/cdf-*.png"
else
	echo "plots: skipped (apt-get install gnuplot-nox)"
fi

# ---- consensus microbenchmark ------------------------------------------------------
[ "${APUS_BENCH_CONSENSUS:-1}" = 0 ] && exit 0
{
	echo
	echo '```'
	build/bench/consensus -n 20000 -s 64 | grep pingpong
	for size in 64 1024 16384; do
		for t in 1 2 4 8; do
			build/bench/consensus -n 20000 -P -s "$size" -t "$t"
		done
	done
	build/bench/consensus -n 20000 -P -s 64 -T tcp
	echo '```'
} | tee -a "$summary"
