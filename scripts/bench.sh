#!/usr/bin/env bash
# Side-by-side benchmark, one run: bare redis-server vs apus (3 replicas,
# shm; commit_wait = read, the default, and commit_wait = reply) for
# redis-benchmark SET and GET with 50 clients and 1 client, and apus with
# the output checker off (checker = off), interleaved (bare, apus,
# apus-reply, apus-nochecker, bare, ...) so drift hits all alike; then
# the consensus microbenchmark next to the shared-memory ping-pong floor.
# Prints Markdown tables (paste into BENCHMARKS.md).
#
#   scripts/bench.sh [ROUNDS]      (default 3 rounds; needs `make all bench-bin`)
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
make -s all bench-bin
apus=build/bin/apus
work=$(mktemp -d /tmp/apus-bench-XXXXXX)
bare_port=7290
conf=$work/cluster.conf
conf_reply=$work/cluster-reply.conf
conf_nochk=$work/cluster-nochk.conf
sed -e "s#/tmp/apus-demo#$work#" -e 's/= 700\([123]\)/= 728\1/' -e 's/^fsync .*/fsync = batch/' \
	apps/redis/cluster-shm.conf >"$conf"
sed -e "s#/tmp/apus-demo#$work/reply#" -e 's/= 700\([123]\)/= 738\1/' \
	-e 's/^fsync .*/fsync = batch\ncommit_wait = reply/' apps/redis/cluster-shm.conf >"$conf_reply"
sed -e "s#/tmp/apus-demo#$work/nochk#" -e 's/= 700\([123]\)/= 748\1/' \
	-e 's/^fsync .*/fsync = batch\nchecker = off/' apps/redis/cluster-shm.conf >"$conf_nochk"

cleanup() {
	"$apus" stop --config "$conf" >/dev/null 2>&1 || true
	"$apus" stop --config "$conf_reply" >/dev/null 2>&1 || true
	"$apus" stop --config "$conf_nochk" >/dev/null 2>&1 || true
	redis-cli -p $bare_port shutdown nosave >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

redis-server --port $bare_port --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
	--logfile "$work/bare.log" --dir "$work" >/dev/null
"$apus" start --config "$conf" >/dev/null
"$apus" start --config "$conf_reply" >/dev/null
"$apus" start --config "$conf_nochk" >/dev/null
sleep 0.5

# run PORT TEST CLIENTS N -> "rps p50 p99"
run() {
	redis-benchmark -p "$1" -t "$2" -c "$3" -n "$4" -r 100000 -d 64 --csv 2>/dev/null |
		awk -F, 'NR==2 { gsub(/"/, ""); print $2, $5, $7 }'
}

declare -A sum
printf '%s\n' "| test | clients | system | rps | p50 ms | p99 ms |" "|---|---|---|---|---|---|" >"$work/rows"
for test in set get; do
	for clients in 50 1; do
		n=$((clients == 50 ? 100000 : 20000))
		for ((r = 0; r < rounds; r++)); do
			for sys in bare apus apus-reply apus-nochecker; do
				case $sys in
				bare) port=$bare_port ;;
				apus) port=7281 ;;
				apus-reply) port=7381 ;;
				*) port=7481 ;;
				esac
				read -r rps p50 p99 < <(run "$port" "$test" "$clients" "$n")
				echo "| $test | $clients | $sys | $rps | $p50 | $p99 |" >>"$work/rows"
				key="$test-$clients-$sys"
				sum[$key]="${sum[$key]:-} $rps/$p50/$p99"
			done
		done
	done
done
cat "$work/rows"
echo
echo "| test | clients | system | throughput / bare (median of $rounds) | bare p50 ms | p50 ms | added p50 µs |"
echo "|---|---|---|---|---|---|---|"
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for test in set get; do
	for clients in 50 1; do
		for sys in apus apus-reply apus-nochecker; do
			b=${sum[$test-$clients-bare]} a=${sum[$test-$clients-$sys]}
			brps=$(echo "$b" | tr ' ' '\n' | cut -d/ -f1 | med)
			arps=$(echo "$a" | tr ' ' '\n' | cut -d/ -f1 | med)
			bp50=$(echo "$b" | tr ' ' '\n' | cut -d/ -f2 | med)
			ap50=$(echo "$a" | tr ' ' '\n' | cut -d/ -f2 | med)
			awk -v t=$test -v c=$clients -v s=$sys -v br="$brps" -v ar="$arps" -v bp="$bp50" -v ap="$ap50" \
				'BEGIN { printf "| %s | %s | %s | %.2f | %s | %s | %.0f |\n", t, c, s, ar / br, bp, ap, (ap - bp) * 1000 }'
		done
	done
done
"$apus" stop --config "$conf" >/dev/null
"$apus" stop --config "$conf_reply" >/dev/null
"$apus" stop --config "$conf_nochk" >/dev/null
redis-cli -p $bare_port shutdown nosave >/dev/null 2>&1 || true

echo
echo '```'
build/bench/consensus -n 20000
build/bench/consensus -n 20000 -P -t 4
echo '```'
