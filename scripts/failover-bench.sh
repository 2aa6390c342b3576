#!/usr/bin/env bash
# Failover time as a client sees it: the leader's server is killed (kill -9)
# and a client (build/bench/failover) writes to the other replicas until one
# acknowledges; the time from the kill to that +OK.  Runs a shm cluster and
# a tcp cluster (each replica in its own network namespace where possible,
# loopback addresses otherwise) side by side, interleaved, RUNS kills each;
# the killed node is restarted and caught up before the next kill.  Prints
# p50, p90 and max per transport, with the heartbeat period.
#
#   scripts/failover-bench.sh [RUNS]      default 12
#   APUS_FAILOVER_TRANSPORTS="shm"        only these
#   APUS_FAILOVER_HEARTBEAT_MS=10         heartbeat_ms of the clusters
#   APUS_FAILOVER_KEEP=1                  keep the clusters' folders (logs)
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-12}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/failover-bench.sh [RUNS]" >&2; exit 2; }
transports=${APUS_FAILOVER_TRANSPORTS:-shm tcp}
hb=${APUS_FAILOVER_HEARTBEAT_MS:-10}
make -s all bench-bin
apus=build/bin/apus
probe=build/bench/failover
work=$(mktemp -d /tmp/apus-failover-XXXXXX)
declare -A conf times
tcp_where=""

conf[shm]=$work/shm.conf
sed -e "s#/tmp/apus-demo#$work/shm#" -e 's/= 700\([123]\)/= 762\1/' \
	-e "s/^heartbeat_ms .*/heartbeat_ms = $hb/" -e "s/^guard .*/guard = off/" apps/redis/cluster-shm.conf >"${conf[shm]}"
conf[tcp]=$work/tcp.conf
sed -e "s#/tmp/apus-demo-tcp#$work/tcp#" -e 's/= 7100$/= 7640/' -e 's/= 7110$/= 7650/' \
	-e "s/^heartbeat_ms .*/heartbeat_ms = $hb/" -e "s/^guard .*/guard = off/" apps/redis/cluster-tcp.conf >"${conf[tcp]}"
if [[ " $transports " == *" tcp "* ]]; then
	tcp_where="each replica in its own network namespace"
	if ! { [ "$(id -u)" -eq 0 ] && bash scripts/netns.sh up 3 >/dev/null 2>&1; }; then
		bash scripts/netns.sh loopback "${conf[tcp]}" >"$work/lo.conf"
		mv "$work/lo.conf" "${conf[tcp]}"
		tcp_where="loopback addresses (no network namespaces here)"
	fi
fi

cleanup() {
	local t
	for t in $transports; do "$apus" stop --config "${conf[$t]}" >/dev/null 2>&1 || true; done
	[ -n "${APUS_FAILOVER_KEEP:-}" ] && { echo "kept $work"; return; }
	bash scripts/drop-regions.sh "$work"
	rm -rf "$work"
}
trap cleanup EXIT

status() { "$apus" status --config "${conf[$1]}" --json | tr -d ' \t\r\n'; }
# node objects of the status, one per line
nodes() { status "$1" | grep -o '{"id":[^{}]*}'; }
field() { grep -o "\"$2\":[^,}]*" <<<"$1" | head -n 1 | cut -d: -f2- | tr -d '"'; }

# ready T - a leader serves and every node is up, none lagging (60 s).
ready() {
	local i obj ok
	for ((i = 0; i < 600; i++)); do
		ok=1
		[ "$(field "$(status "$1")" leader)" != null ] || ok=0
		while read -r obj; do
			case $(field "$obj" role) in leader | backup) ;; *) ok=0 ;; esac
			[ "$(field "$obj" lag)" = 0 ] || ok=0
		done < <(nodes "$1")
		[ "$ok" = 1 ] && return 0
		sleep 0.1
	done
	echo "failover-bench: $1 cluster not ready after 60 s:" >&2
	"$apus" status --config "${conf[$1]}" >&2
	return 1
}

one_run() { # T -> appends the failover time to times[T]
	local t=$1 leader obj targets=() pid addr out
	ready "$t"
	leader=$(field "$(status "$t")" leader)
	while read -r obj; do
		addr=$(field "$obj" app_addr)
		if [ "$(field "$obj" id)" = "$leader" ]; then
			pid=$(field "$obj" pid)
			redis-cli -h "${addr%:*}" -p "${addr##*:}" SET warm 1 >/dev/null
		else
			targets+=("$addr")
		fi
	done < <(nodes "$t")
	out=$("$probe" --kill "$pid" "${targets[@]}")
	echo "  $t: node $leader killed: $out"
	times[$t]+="$(sed 's/^failover_ms=\([0-9.]*\).*/\1/' <<<"$out") "
	bash scripts/fault.sh restart --config "${conf[$t]}" --node "$leader" >/dev/null 3>&-
}

for t in $transports; do "$apus" start --config "${conf[$t]}" >/dev/null; done
for ((r = 1; r <= runs; r++)); do
	echo "run $r of $runs"
	for t in $transports; do one_run "$t"; done
done

echo
echo "failover time (kill -9 of the leader -> first write acknowledged), $runs runs, heartbeat_ms = $hb"
printf '%-6s %9s %9s %9s %9s\n' transport min p50 p90 max
for t in $transports; do
	# shellcheck disable=SC2086
	sort -g <<<"$(printf '%s\n' ${times[$t]})" | awk -v t="$t" '
		{ v[NR] = $1 }
		END { p50 = v[int((NR + 1) / 2)]; p90 = v[int(NR * 0.9 + 0.999)]
		      printf "%-9s %6.1f ms %6.1f ms %6.1f ms %6.1f ms\n", t, v[1], p50, p90, v[NR] }'
done
[ -n "$tcp_where" ] && echo "tcp: $tcp_where"
echo "machine: $(nproc) cores, $(uname -r)"
