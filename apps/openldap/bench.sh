#!/usr/bin/env bash
# slapd throughput and latency, bare against apus, side by side in one run:
#   bare      one slapd (the ceiling; not replicated)
#   apus-shm  3 replicas under apus over shm (apps/openldap/cluster-shm.conf,
#             guard off: nothing here crashes)
#   apus-tcp  3 replicas over tcp, each in its own network namespace
#             (apps/openldap/cluster-tcp.conf; skipped, saying so, without
#             root and ip netns)
# ROUNDS rounds (default 3), each running bare then the apus systems with the
# same load, on a fresh initial database (init.sh):
#   1. one connection alone: SERIAL (200) modifies of one entry, one
#      ldapmodify: the mean time of a write (ms) when nothing else runs;
#   2. apps/openldap/workload.sh: CONNS (20) writers of OPS (25) rounds
#      each (an add, a modify of it, a modify of a shared entry, and every
#      5th round a delete), SEARCHERS (4) searching until they are done:
#      writes/s and searches/s over the writers' wall time.
# Then CPU-seconds per 1,000 writes summed over the system's slapd
# processes (apus: all three, shim and coordinator included, until
# digest.sh finds the replicas equal), and write throughput relative to
# the round's bare run.  Prints one markdown table.
#
#   apps/openldap/bench.sh [ROUNDS]
#   APUS_LDAP_BENCH_CONNS=20 APUS_LDAP_BENCH_OPS=25 APUS_LDAP_BENCH_SEARCHERS=4
#   APUS_LDAP_BENCH_SERIAL=200  APUS_BIN=path/to/apus
#
# Ports 19940-19959 (bare 19941; shm 19951-19953; tcp app 19945, peer
# 19946, guard 19947 in namespaces apuslb0..2, 10.82.0.0/24, made and
# removed by this script).
set -euo pipefail
cd "$(dirname "$0")/../.."

case ${1:-} in -h | --help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;; esac
rounds=${1:-3}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "usage: apps/openldap/bench.sh [ROUNDS] (--help)" >&2; exit 2; }
conns=${APUS_LDAP_BENCH_CONNS:-20}
ops=${APUS_LDAP_BENCH_OPS:-25}
searchers=${APUS_LDAP_BENCH_SEARCHERS:-4}
serial=${APUS_LDAP_BENCH_SERIAL:-200}
for b in /usr/sbin/slapd /usr/sbin/slapadd; do
	[ -x "$b" ] || { echo "bench.sh: $b not found (apt-get install slapd ldap-utils)" >&2; exit 1; }
done
command -v ldapmodify >/dev/null || { echo "bench.sh: ldapmodify not found (apt-get install ldap-utils)" >&2; exit 1; }
# APUS_BIN: another build's apus (then nothing is built here).
[ -n "${APUS_BIN:-}" ] || make -s all
apus=${APUS_BIN:-build/bin/apus}
hz=$(getconf CLK_TCK)
# shellcheck source=scripts/bench/app-bench.bash
. scripts/bench/app-bench.bash
app_bench_setup openldap 19950 19940 apuslb 10.82.0

# bare: a one-node config, only for init.sh's database and slapd.conf.
printf '[node 0]\naddress = 127.0.0.1\napp_port = 19941\ndata_dir = %s/bare\n' "$work" >"$work/bare.conf"

bind() { echo -x -D cn=admin,dc=apus,dc=test -w secret -H "ldap://$1:$2"; }

serving() {
	# shellcheck disable=SC2046 # bind's words
	timeout 5 ldapsearch $(bind "$1" "$2") -o nettimeout=2 -LLL -s base -b dc=apus,dc=test dn \
		>/dev/null 2>&1
}

# serial_ms HOST PORT - the mean ms of one write, SERIAL modifies on one
# connection with nothing else running.
serial_ms() {
	local j t0 t1
	for ((j = 1; j <= serial; j++)); do
		printf 'dn: cn=counter,dc=apus,dc=test\nchangetype: modify\nreplace: description\ndescription: serial %d\n\n' "$j"
	done >"$work/serial.ldif"
	t0=$(date +%s%N)
	# shellcheck disable=SC2046
	ldapmodify $(bind "$1" "$2") -f "$work/serial.ldif" >/dev/null
	t1=$(date +%s%N)
	awk -v d=$((t1 - t0)) -v n="$serial" 'BEGIN { printf "%.2f", d / n / 1e6 }'
}

# run_load NAME HOST PORT PID... - the load; a table row in ROW, writes/s in ROW_RATE.
run_load() {
	local name=$1 h=$2 p=$3 c0 c1 t0 t1 out writes searches ms i
	shift 3
	c0=$(cpu_ticks "$@")
	ms=$(serial_ms "$h" "$p")
	t0=$(date +%s%N)
	out=$(CONNS=$conns OPS=$ops SEARCHERS=$searchers PREFIX="r$round" \
		apps/openldap/workload.sh "$p" "$h" 2>&1) || { echo "$out" >&2; return 1; }
	t1=$(date +%s%N)
	writes=$(sed -n 's/.*(\([0-9]*\) writes).*/\1/p' <<<"$out")
	searches=$(sed -n 's/.*; \([0-9]*\) searches$/\1/p' <<<"$out")
	# The backups' replay counts too: wait until every replica is equal.
	if [ "$name" != bare ]; then
		for ((i = 0; i < 300; i++)); do
			apps/openldap/digest.sh --config "${conf[$name]}" >"$work/digest.out" 2>&1 && break
			sleep 0.2
		done
		[ "$i" -lt 300 ] || { echo "bench.sh: the replicas did not become equal:" >&2; cat "$work/digest.out" >&2; return 1; }
	fi
	c1=$(cpu_ticks "$@")
	ROW_RATE=$(awk -v w="$writes" -v d=$((t1 - t0)) 'BEGIN { printf "%.0f", w / (d / 1e9) }')
	ROW="| $round | $name | $ms | $ROW_RATE | $(awk -v s="$searches" -v d=$((t1 - t0)) 'BEGIN { printf "%.0f", s / (d / 1e9) }') | $(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$((writes + serial))" 'BEGIN { printf "%.2f", t / hz / n * 1000 }')"
}

echo "slapd $(dpkg-query -W -f='${Version}' slapd 2>/dev/null), $(nproc) cores; one connection: $serial modifies; then $conns writers x $ops rounds, $searchers searchers"
echo
echo "| round | system | ms per write, one connection | writes/s, $conns writers | searches/s | CPU s / 1k writes | writes vs bare |"
echo "|---|---|---|---|---|---|---|"
for ((round = 1; round <= rounds; round++)); do
	apps/openldap/init.sh --config "$work/bare.conf" --force >/dev/null
	/usr/sbin/slapd -d 0 -h "ldap://127.0.0.1:19941/" -f "$work/bare/slapd.conf" >"$work/bare.log" 2>&1 &
	bare_pid=$!
	wait_serving 127.0.0.1 19941
	run_load bare 127.0.0.1 19941 "$bare_pid"
	bare_rate=$ROW_RATE
	echo "$ROW | 1.00 |"
	kill "$bare_pid"
	wait "$bare_pid" 2>/dev/null || true
	bare_pid=

	for s in $systems; do
		apps/openldap/init.sh --config "${conf[$s]}" --force >/dev/null
		"$apus" start --config "${conf[$s]}" >"$work/start.log" 2>&1 || { cat "$work/start.log" >&2; exit 1; }
		wait_serving "${host[$s]}" "${port[$s]}"
		mapfile -t pids < <(cat "$work/${s#apus-}"/node*/apus.pid)
		run_load "$s" "${host[$s]}" "${port[$s]}" "${pids[@]}"
		echo "$ROW | $(awk -v a="$ROW_RATE" -v b="$bare_rate" 'BEGIN { printf "%.2f", a / b }') |"
		"$apus" stop --config "${conf[$s]}" >/dev/null 2>&1
	done
done
