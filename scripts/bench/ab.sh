#!/usr/bin/env bash
# A/B of apus variants, interleaved round by round so that drift hits all
# alike (these machines are shared and noisy: compare within one run).
#
#   scripts/bench/ab.sh ROUNDS "LOADGEN ARGS" VARIANT...
#
# A VARIANT is `bare` (one redis-server), `default` (build/bin/apus), the
# path of another build's apus binary (e.g. a worktree's build of the
# previous commit: its libapus.so is taken from beside it), or environment
# assignments for the default build (APUS_SPIN_MAX_US=5).  Each apus run
# starts a fresh 3-replica shm cluster from apps/redis/cluster-shm.conf
# (guard off), runs build/bench/loadgen against its leader and prints the
# loadgen line plus cpu_ticks (utime + stime of the three servers).
# APUS_AB_CONFIG: another config to start from (e.g. one without the keys
# an older build does not know).
# Example:
#   scripts/bench/ab.sh 3 "--clients 1 --requests 20000 --op set" bare APUS_SPIN_MAX_US=5 default
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[ $# -ge 3 ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rounds=$1 args=$2
shift 2
make -s all bench-bin || exit 1
work=$(mktemp -d /tmp/apus-ab-XXXXXX)
trap 'redis-cli -p 7390 shutdown nosave >/dev/null 2>&1; rm -rf "$work"' EXIT
redis-server --port 7390 --save "" --appendonly no --daemonize yes --logfile "$work/bare.log" >/dev/null
sleep 0.3

ticks() { for p in "$@"; do awk '{print $14+$15}' "/proc/$p/stat"; done | paste -sd+ | bc; }

run_apus() { # APUS-BINARY [ENV...]
	local bin=$1 conf=$work/c.conf addr pids t0 out
	shift
	rm -rf "$work/c"
	sed -e "s#/tmp/apus-demo#$work/c#" -e "s/= 700\([123]\)/= 739\1/" -e "s/^guard .*/guard = off/" \
		-e "s/= 701\([123]\)/= 749\1/" "${APUS_AB_CONFIG:-apps/redis/cluster-shm.conf}" >"$conf"
	env "$@" "$bin" start --config "$conf" >/dev/null || { echo "start failed"; return; }
	addr=$("$bin" status --config "$conf" --json | tr -d ' \t\r\n' |
		grep -o '{[^{}]*"role":"leader"[^{}]*}' | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
	pids=$(for i in 0 1 2; do cat "$work/c/node$i/apus.pid"; done)
	t0=$(ticks $pids)
	# shellcheck disable=SC2086
	out=$(build/bench/loadgen --proto redis --host "${addr%:*}" --port "${addr##*:}" $args 2>&1 | tail -n 1)
	echo "$out cpu_ticks=$(($(ticks $pids) - t0))"
	"$bin" stop --config "$conf" >/dev/null
	bash scripts/drop-regions.sh "$work/c"
}

for ((r = 1; r <= rounds; r++)); do
	for v in "$@"; do
		case $v in
		bare)	# shellcheck disable=SC2086
			out=$(build/bench/loadgen --proto redis --host 127.0.0.1 --port 7390 $args 2>&1 | tail -n 1) ;;
		default) out=$(run_apus build/bin/apus) ;;
		*=*)	# shellcheck disable=SC2086
			out=$(run_apus build/bin/apus $v) ;;
		*)	out=$(run_apus "$v") ;;
		esac
		echo "round $r  $v  $out"
	done
done
