#!/usr/bin/env bash
# Side-by-side benchmark, one run: bare redis-server vs apus (3 replicas,
# shm; commit_wait = read, the default, and commit_wait = reply) for
# redis-benchmark SET and GET with 50 clients and 1 client, and apus with
# the output checker off (checker = off), interleaved (bare, apus,
# apus-reply, apus-nochecker, apus-tcp, bare, ...) so drift hits all alike;
# apus-tcp is apps/redis/cluster-tcp.conf: tcp with each replica in its own
# network namespace (loopback addresses where namespaces are unavailable).
# Then the consensus microbenchmark over shm and tcp next to the
# shared-memory and loopback-TCP ping-pong floors.
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
conf_tcp=$work/cluster-tcp.conf
sed -e "s#/tmp/apus-demo#$work#" -e 's/= 700\([123]\)/= 728\1/' -e 's/^fsync .*/fsync = batch/' \
	apps/redis/cluster-shm.conf >"$conf"
sed -e "s#/tmp/apus-demo#$work/reply#" -e 's/= 700\([123]\)/= 738\1/' \
	-e 's/^fsync .*/fsync = batch\ncommit_wait = reply/' apps/redis/cluster-shm.conf >"$conf_reply"
sed -e "s#/tmp/apus-demo#$work/nochk#" -e 's/= 700\([123]\)/= 748\1/' \
	-e 's/^fsync .*/fsync = batch\nchecker = off/' apps/redis/cluster-shm.conf >"$conf_nochk"
sed -e "s#/tmp/apus-demo-tcp#$work/tcp#" -e 's/= 7100$/= 7580/' -e 's/= 7110$/= 7590/' \
	-e 's/^fsync .*/fsync = batch/' apps/redis/cluster-tcp.conf >"$conf_tcp"
if [ "$(id -u)" -eq 0 ] && bash scripts/netns.sh up 3 >/dev/null 2>&1; then
	tcp_where="each replica in its own network namespace"
else
	bash scripts/netns.sh loopback "$conf_tcp" >"$conf_tcp.lo" && mv "$conf_tcp.lo" "$conf_tcp"
	tcp_where="loopback addresses (no network namespaces here)"
fi
tcp_host=$(awk -F= '/^address/{gsub(/[ \t]/,"",$2); print $2; exit}' "$conf_tcp")
tcp_port=$(awk -F= '/^\[node 0\]/{n=1} /^app_port/{gsub(/[ \t]/,"",$2); p=$2; if (n) {print p; exit}} END{}' "$conf_tcp")
[ -n "$tcp_port" ] || tcp_port=7580

cleanup() {
	"$apus" stop --config "$conf" >/dev/null 2>&1 || true
	"$apus" stop --config "$conf_reply" >/dev/null 2>&1 || true
	"$apus" stop --config "$conf_nochk" >/dev/null 2>&1 || true
	"$apus" stop --config "$conf_tcp" >/dev/null 2>&1 || true
	redis-cli -p $bare_port shutdown nosave >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

redis-server --port $bare_port --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
	--logfile "$work/bare.log" --dir "$work" >/dev/null
"$apus" start --config "$conf" >/dev/null
"$apus" start --config "$conf_reply" >/dev/null
"$apus" start --config "$conf_nochk" >/dev/null
"$apus" start --config "$conf_tcp" >/dev/null
sleep 0.5
echo "apus-tcp: $tcp_where"

# run HOST PORT TEST CLIENTS N -> "rps p50 p99"
run() {
	redis-benchmark -h "$1" -p "$2" -t "$3" -c "$4" -n "$5" -r 100000 -d 64 --csv 2>/dev/null |
		awk -F, 'NR==2 { gsub(/"/, ""); print $2, $5, $7 }'
}

declare -A sum
printf '%s\n' "| test | clients | system | rps | p50 ms | p99 ms |" "|---|---|---|---|---|---|" >"$work/rows"
for test in set get; do
	for clients in 50 1; do
		n=$((clients == 50 ? 100000 : 20000))
		for ((r = 0; r < rounds; r++)); do
			for sys in bare apus apus-reply apus-nochecker apus-tcp; do
				host=127.0.0.1
				case $sys in
				bare) port=$bare_port ;;
				apus) port=7281 ;;
				apus-reply) port=7381 ;;
				apus-nochecker) port=7481 ;;
				apus-tcp) host=$tcp_host port=$tcp_port ;;
				esac
				read -r rps p50 p99 < <(run "$host" "$port" "$test" "$clients" "$n")
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
		for sys in apus apus-reply apus-nochecker apus-tcp; do
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
"$apus" stop --config "$conf_tcp" >/dev/null
redis-cli -p $bare_port shutdown nosave >/dev/null 2>&1 || true

echo
echo '```'
build/bench/consensus -n 20000
build/bench/consensus -n 20000 -P -t 4
build/bench/consensus -n 20000 -P -T tcp
echo '```'
