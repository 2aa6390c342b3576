#!/usr/bin/env bash
# sysbench oltp_read_write against bare mariadbd and 3-replica apus
# clusters, side by side in one run (BENCHMARKS.md, "MariaDB").
#
#   apps/mariadb/bench.sh
#
# Systems, one at a time, each from a fresh datadir made by init.sh:
#   bare          one mariadbd, no apus, the app_cmd of cluster-shm.conf
#   shm-reads     apus, transport shm, thread_order = reads
#   shm-requests  apus, transport shm, thread_order = requests
#   tcp-reads     apus, transport tcp on 127.0.0.1 (a peer_port per node)
#   tcp-requests  the same with thread_order = requests
# The clusters take every other key from apps/mariadb/cluster-shm.conf.
# Per system: sysbench prepare once (2 tables x 1,000 rows), then a run of
# TIME seconds per thread count.  After each apus run: up to CATCHUP_S
# seconds for checksum.sh to show every replica equal, the backups' lag
# (entries not applied) after that wait, and per node the growth over the
# run of order_stalls (apus status --json) and of the replay turns left
# untaken for 10 s and skipped (its apus.log).  Per run also: sysbench's
# total time (it exceeds TIME when transactions hang) and CPU in cores:
# the servers' (utime + stime of the mariadbd processes; apus's threads
# are inside them), sysbench's, and the rest of the host's busy time
# (/proc/stat: other users' processes show there).
#
# Latency: sysbench --percentile=99 gives p99; p50 is read from the same
# run's --histogram (sysbench's own percentile uses that histogram: the
# first bucket whose cumulative count reaches 50% of the transactions).
#
# Environment: TIME (15), THREADS ("1 4"), CATCHUP_S (60), SYSTEMS (all
# five, in the order above), APUS_BIN (build/bin/apus beside this script).
# Ports 20300-20399; everything under /tmp/apus-mdbbench/ (results/ is
# kept until the next run: sysbench outputs, status, node logs,
# table.md).  On exit it stops its clusters and kills the processes whose
# command line holds /tmp/apus-mdbbench/, and no others.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
APUS=${APUS_BIN:-$root/build/bin/apus}
W=/tmp/apus-mdbbench
R=$W/results
TIME=${TIME:-15}
THREADS=${THREADS:-1 4}
CATCHUP_S=${CATCHUP_S:-60}
SYSTEMS=${SYSTEMS:-bare shm-reads shm-requests tcp-reads tcp-requests}
BASE_CONF=$root/apps/mariadb/cluster-shm.conf
PATH=$PATH:/usr/sbin

for c in sysbench mariadbd mariadb mariadb-admin mariadb-install-db; do
	command -v "$c" >/dev/null || { echo "bench.sh: $c not found" >&2; exit 1; }
done
[ -x "$APUS" ] || { echo "bench.sh: $APUS not built (make)" >&2; exit 1; }

# Processes of ours: their command line holds $W/ (mariadbd's datadir, the
# clients of its admin sockets).  Nothing else is ever signalled.
own_pids() {
	local d p cmd
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = "$$" ] || [ "$p" = "$BASHPID" ] && continue
		cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
		[[ $cmd == *"$W/"* ]] && echo "$p"
	done
}
kill_own() {
	local pids i
	pids=$(own_pids)
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		pids=$(own_pids)
		[ -n "$pids" ] || return 0
		sleep 0.2
	done
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null
	return 0
}
cleanup() {
	local c
	trap - EXIT INT TERM
	for c in "$W"/*.conf; do
		[ -f "$c" ] && grep -q '^\[node' "$c" && grep -q '^app_cmd' "$c" &&
			timeout 30 "$APUS" stop --config "$c" >/dev/null 2>&1
	done
	kill_own
	bash "$root/scripts/drop-regions.sh" "$W"
	# Datadirs go, results stay.
	find "$W" -mindepth 1 -maxdepth 1 ! -name results -exec rm -rf {} + 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A previous run of ours that died without its trap.
kill_own
bash "$root/scripts/drop-regions.sh" "$W"
rm -rf "$W"
mkdir -p "$R"
chmod 700 "$W"
# tee from inside $R: its command line must not hold $W/ (kill_own).
exec > >(cd "$R" && exec tee bench.log) 2>&1

app_cmd=$(sed -n 's/^app_cmd[[:space:]]*=[[:space:]]*//p' "$BASE_CONF")
sb_common=(--mysql-host=127.0.0.1 --mysql-user=sbtest --mysql-password= --mysql-db=sbtest
	--tables=2 --table-size=1000)

# Percentile PCT (ms) of a sysbench --histogram output.
hist_pct() { # FILE PCT
	awk -v pct="$2" '
		/Latency histogram/ { h = 1; next }
		h && /^[[:space:]]*[0-9.]+[[:space:]]+\|/ { v[n] = $1; c[n] = $NF; tot += $NF; n++; next }
		h && n && !/\|/ { h = 0 }
		END {
			if (!tot) { print "-"; exit }
			for (i = 0; i < n; i++) { cum += c[i]; if (cum >= tot * pct / 100) { print v[i]; exit } }
		}' "$1"
}

# Results, one row per (system, threads).
rows=()
declare -A tps_bare

# shellcheck source=scripts/bench/cpu.sh
. "$root/scripts/bench/cpu.sh"
# "busy total" jiffies of the whole host (every core), from /proc/stat.
host_ticks() {
	local _c u n sy i w q sq st
	read -r _c u n sy i w q sq st _ </proc/stat
	echo "$((u + n + sy + q + sq + st)) $((u + n + sy + i + w + q + sq + st))"
}
HZ=$(getconf CLK_TCK)

# run_sb LABEL PORT THREADS SERVER-PID... - one sysbench run; sets tps p50
# p99 errs secs (sysbench's total time), and over the run in cores: cpu
# (the servers), sbcpu (sysbench), busy (the whole host) and other (busy
# less the two: other users' processes, apus's CLI, softirq time).
run_sb() {
	local out=$R/$1-t$3.txt label=$1 port=$2 t=$3 c0 c1 h0 h1 w0 w1
	shift 3
	tps=- p50=- p99=- errs=- secs=- cpu=- sbcpu=- busy=- other=-
	c0=$(cpu_ticks "$@")
	h0=$(host_ticks)
	w0=$(date +%s.%N)
	# bash's time: sysbench's own CPU (user and system seconds).
	{
		TIMEFORMAT='%U %S'
		time timeout -k 5 $((TIME + 120)) sysbench oltp_read_write "${sb_common[@]}" \
			--mysql-port="$port" --threads="$t" --time="$TIME" --percentile=99 --histogram run \
			>"$out" 2>&1
	} 2>"$out.cpu" || echo "bench.sh: sysbench $label threads=$t failed (see $out)"
	w1=$(date +%s.%N)
	h1=$(host_ticks)
	c1=$(cpu_ticks "$@")
	tps=$(sed -n 's/.*transactions:.*(\([0-9.]*\) per sec.*/\1/p' "$out")
	errs=$(sed -n 's/.*ignored errors:[[:space:]]*\([0-9]*\).*/\1/p' "$out")
	p99=$(sed -n 's/.*99th percentile:[[:space:]]*\([0-9.]*\).*/\1/p' "$out")
	secs=$(sed -n 's/.*total time:[[:space:]]*\([0-9.]*\)s.*/\1/p' "$out")
	p50=$(hist_pct "$out" 50)
	: "${tps:=-}" "${errs:=-}" "${p99:=-}" "${secs:=-}"
	cpu=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v s="$w0" -v e="$w1" 'BEGIN { printf "%.2f", (b - a) / hz / (e - s) }')
	sbcpu=$(awk -v s="$w0" -v e="$w1" 'NF == 2 && $1 ~ /^[0-9.]+$/ { c = $1 + $2 }
		END { printf "%.2f", c / (e - s) }' "$out.cpu")
	# The host's busy cores and what neither the servers nor sysbench used.
	busy=$(awk -v a="$h0" -v b="$h1" -v n="$(nproc)" 'BEGIN { split(a, x, " "); split(b, y, " ");
		printf "%.2f", n * (y[1] - x[1]) / (y[2] - x[2]) }')
	other=$(awk -v b="$busy" -v c="$cpu" -v s="$sbcpu" 'BEGIN { printf "%.2f", b - c - s }')
	echo "$label threads=$t: $tps tps over ${secs} s, p50 $p50 ms, p99 $p99 ms, ignored errors $errs;"\
		"CPU cores: servers $cpu, sysbench $sbcpu, the rest of the host $other (busy $busy of $(nproc))"
}

# ---------------------------------------------------------------- bare
run_bare() {
	local d=$W/bare port=20300 cmd pid i t
	printf '[node 0]\ndata_dir = %s\n' "$d" >"$W/bare.init"
	"$root/apps/mariadb/init.sh" --config "$W/bare.init" --force >"$R/bare-init.txt" 2>&1 || return 1
	cmd=${app_cmd//\{data_dir\}/$d}
	cmd=${cmd//\{port\}/$port}
	cmd=${cmd//\{address\}/127.0.0.1}
	# shellcheck disable=SC2086
	$cmd >"$d/mariadbd.log" 2>&1 &
	pid=$!
	for ((i = 0; i < 300; i++)); do
		mariadb-admin --no-defaults -S "$d/mysqld.sock" -u root ping >/dev/null 2>&1 && break
		kill -0 "$pid" 2>/dev/null || { echo "bench.sh: bare mariadbd died" >&2; return 1; }
		sleep 0.1
	done
	timeout 120 sysbench oltp_read_write "${sb_common[@]}" --mysql-port=$port prepare \
		>"$R/bare-prepare.txt" 2>&1 || { echo "bench.sh: bare prepare failed" >&2; return 1; }
	for t in $THREADS; do
		run_sb bare $port "$t" "$pid"
		tps_bare[$t]=$tps
		rows+=("bare|-|$t|$tps|$secs|$p50|$p99|$errs|$cpu / $sbcpu / $other|-|-|-|-")
	done
	timeout 60 mariadb-admin --no-defaults -S "$d/mysqld.sock" -u root shutdown >/dev/null 2>&1
	for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -rf "$d"
}

# ---------------------------------------------------------------- apus
# write_conf NAME TRANSPORT ORDER K - a cluster config on ports 20300+10K+i
# (app) and 20305+10K+i (peer), data under $W/NAME; every global key but
# cluster, transport and thread_order as in cluster-shm.conf.
write_conf() {
	local name=$1 transport=$2 order=$3 k=$4 c=$W/$1.conf i
	{
		echo "# generated by apps/mariadb/bench.sh from apps/mariadb/cluster-shm.conf"
		sed -n '/^\[node/q; p' "$BASE_CONF" | grep -v '^[[:space:]]*#' | grep -v '^[[:space:]]*$' |
			sed -e "s/^cluster[[:space:]]*=.*/cluster = mdbbench-$name/" \
				-e "s/^transport[[:space:]]*=.*/transport = $transport/" \
				-e "s/^thread_order[[:space:]]*=.*/thread_order = $order/"
		grep -q '^thread_order' "$BASE_CONF" || echo "thread_order = $order"
		[ "$transport" = tcp ] && echo "secret_file = $W/apus.key"
		for i in 0 1 2; do
			echo
			echo "[node $i]"
			echo "address  = 127.0.0.1"
			echo "app_port = $((20300 + 10 * k + i))"
			[ "$transport" = tcp ] && echo "peer_port = $((20305 + 10 * k + i))"
			echo "data_dir = $W/$name/node$i"
		done
	} >"$c"
	echo "$c"
}

status_json() { timeout 20 "$APUS" status --config "$1" --json 2>/dev/null | tr -d ' \t\r\n'; }
# FIELD of each node NODE... in apus status --json JSON ("?" where a node
# does not say it).
field_of() { # JSON FIELD NODE...
	local json=$1 field=$2 i v out=()
	shift 2
	for i in "$@"; do
		v=$(grep -o "{\"id\":$i,[^{}]*}" <<<"$json" | grep -o "\"$field\":[0-9]*" | cut -d: -f2)
		out+=("${v:-?}")
	done
	echo "${out[@]}"
}
# Replay turns a backup's server left untaken for 10 s (skipped), nodes 0 1 2.
skips_of() { # NAME
	local i v out=()
	for i in 0 1 2; do
		v=$(grep -c 'untaken for' "$W/$1/node$i/apus.log" 2>/dev/null)
		out+=("${v:-0}")
	done
	echo "${out[@]}"
}
leader_port() { # JSON
	local id addr
	id=$(sed 's/{[^{}]*}//g' <<<"$1" | grep -o '"leader":[0-9]*' | cut -d: -f2)
	[ -n "$id" ] || return 1
	addr=$(grep -o "{\"id\":$id,[^{}]*}" <<<"$1" | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
	[ -n "$addr" ] || return 1
	echo "${addr##*:}"
}
# catchup CONF LABEL - seconds until checksum.sh shows all replicas equal,
# or "no" after CATCHUP_S; the last checksum lines go to $R/LABEL-checksum.txt.
catchup() {
	local t0 now rc
	t0=$(date +%s.%N)
	while :; do
		timeout 30 "$root/apps/mariadb/checksum.sh" --config "$1" >"$R/$2-checksum.txt" 2>&1
		rc=$?
		now=$(date +%s.%N)
		if [ $rc -eq 0 ]; then
			awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.0f\n", b - a }'
			return 0
		fi
		awk -v a="$t0" -v b="$now" -v m="$CATCHUP_S" 'BEGIN { exit !(b - a >= m) }' && break
		sleep 1
	done
	echo no
	return 1
}

run_apus() { # NAME TRANSPORT ORDER K
	local name=$1 c j p port s0 s1 k0 k1 t agree i a b d lag skip
	c=$(write_conf "$@")
	"$root/apps/mariadb/init.sh" --config "$c" --force >"$R/$name-init.txt" 2>&1 || return 1
	timeout 120 "$APUS" start --config "$c" >"$R/$name-start.txt" 2>&1 ||
		{ echo "bench.sh: apus start $name failed:"; cat "$R/$name-start.txt"; return 1; }
	j=$(status_json "$c")
	port=$(leader_port "$j") || { echo "bench.sh: $name: no leader"; return 1; }
	timeout 120 sysbench oltp_read_write "${sb_common[@]}" --mysql-port="$port" prepare \
		>"$R/$name-prepare.txt" 2>&1 || { echo "bench.sh: $name prepare failed" >&2; return 1; }
	echo "$name: prepared; replicas equal after $(catchup "$c" "$name-prepare") s"
	for t in $THREADS; do
		j=$(status_json "$c")
		s0=$(field_of "$j" order_stalls 0 1 2)
		k0=$(skips_of "$name")
		# The servers: what apus start wrote to each node's apus.pid.
		# shellcheck disable=SC2046
		run_sb "$name" "$port" "$t" $(cat "$W/$name"/node[012]/apus.pid 2>/dev/null)
		agree=$(catchup "$c" "$name-t$t")
		[ "$agree" = no ] && agree="no ($CATCHUP_S s)" || agree="yes (${agree} s)"
		j=$(status_json "$c")
		echo "$j" >"$R/$name-t$t-status.json"
		s1=$(field_of "$j" order_stalls 0 1 2)
		read -r -a a <<<"$s0"
		read -r -a b <<<"$s1"
		d=""
		for i in 0 1 2; do
			if [[ ${a[$i]} =~ ^[0-9]+$ && ${b[$i]} =~ ^[0-9]+$ ]]; then d+="${d:+ }$((b[i] - a[i]))"
			else d+="${d:+ }?"; fi
		done
		lag=$(field_of "$j" lag 1 2)  # entries not yet applied
		k1=$(skips_of "$name")
		read -r -a a <<<"$k0"
		read -r -a b <<<"$k1"
		skip="$((b[0] - a[0])) $((b[1] - a[1])) $((b[2] - a[2]))"
		echo "$name threads=$t: replicas equal: $agree; backups' lag (entries) $lag;"\
			"order_stalls n0 n1 n2: $d (totals $s1); turns skipped (untaken 10 s) n0 n1 n2: $skip"
		rows+=("${name%%-*}|$3|$t|$tps|$secs|$p50|$p99|$errs|$cpu / $sbcpu / $other|$agree|$lag|$d|$skip")
		p=$(leader_port "$j") && port=$p
	done
	timeout 60 "$APUS" stop --config "$c" >/dev/null 2>&1
	for i in 0 1 2; do cp "$W/$name/node$i/apus.log" "$R/$name-node$i.log" 2>/dev/null; done
	bash "$root/scripts/drop-regions.sh" "$W/$name"
	rm -rf "${W:?}/$name"
}

echo "apus mariadb bench: $(date -u '+%F %T') UTC, commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null),"\
	"$(nproc) cores, $(mariadbd --version | awk '{print $3}'), $(sysbench --version)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
k=0
for s in $SYSTEMS; do
	case $s in
	bare) run_bare || echo "bench.sh: bare failed" ;;
	shm-reads | shm-requests | tcp-reads | tcp-requests)
		k=$((k + 1))
		run_apus "$s" "${s%%-*}" "${s#*-}" "$k" || echo "bench.sh: $s failed"
		;;
	*) echo "bench.sh: unknown system '$s'" >&2 ;;
	esac
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

{
	echo
	echo "| system | thread_order | threads | tps | vs bare | run s | p50 ms | p99 ms | ignored errors | CPU cores: servers / sysbench / rest | replicas equal (time to agree) | backups' lag after | order_stalls n0 n1 n2 | turns skipped n0 n1 n2 |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for r in "${rows[@]}"; do
		IFS='|' read -r sys ord t tp sec q50 q99 er cp ag lg st sk <<<"$r"
		vs=-
		if [[ ${tps_bare[$t]:-} =~ ^[0-9.]+$ && $tp =~ ^[0-9.]+$ ]]; then
			vs=$(awk -v a="$tp" -v b="${tps_bare[$t]}" 'BEGIN { printf "%.2f", a / b }')
		fi
		echo "| $sys | $ord | $t | $tp | $vs | $sec | $q50 | $q99 | $er | $cp | $ag | $lg | $st | $sk |"
	done
} | tee "$R/table.md"
