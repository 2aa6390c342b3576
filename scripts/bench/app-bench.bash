# Sourced by the apps' side-by-side benchmarks (apps/*/bench.sh): bare
# against apus over shm and over tcp, the apus systems made from the app's
# shipped configs with the guard off.
#
#   app_bench_setup APP SHM_PORTBASE TCP_PORTBASE NETNS_PREFIX SUBNET
#
# makes $work (a fresh directory), $work/shm.conf (node i's app port
# SHM_PORTBASE+1+i) and $work/tcp.conf (app port TCP_PORTBASE+5, peer +6,
# guard +7, in namespaces NETNS_PREFIX0..2 on SUBNET.1-3, made here when
# root and ip netns allow), each node's data in $work/shm/nodeN and
# $work/tcp/nodeN; sets $systems ("apus-shm apus-tcp", or "apus-shm" with
# the reason printed), the arrays conf, host and port by system, and
# an EXIT trap that stops both clusters, kills $bare_pid if set and removes
# the namespaces and $work.  cpu_ticks comes from scripts/bench/cpu.sh.

# shellcheck source=scripts/bench/cpu.sh
. "$(dirname "${BASH_SOURCE[0]}")/cpu.sh"

# app_bench_conf SHIPPED OUT DIR AWK-ARGS... - SHIPPED with its data
# directories and key under DIR, the guard off, its cluster renamed, and
# its ports, namespaces and addresses as AWK-ARGS' variables say (base,
# tcp, ns, subnet).
app_bench_conf() {
	local shipped=$1 out=$2 dir=$3 prefix
	shift 3
	prefix=$(sed -n 's#^data_dir *= *\(.*\)/node0$#\1#p' "$shipped")
	sed -e "s#$prefix/node#$dir/node#" -e "s#^secret_file *=.*#secret_file = $dir/apus.key#" \
		-e 's/^guard .*/guard = off/' \
		-e "s/^cluster .*/cluster = bench-${dir##*/}-$$/" -e "s#{config_dir}#$(dirname "$shipped")#g" \
		"$shipped" | awk "$@" '
		/^\[node [0-9]+\]/ { node = $2 + 0 }
		/^app_port *=/ && (tcp || node >= 0) { print "app_port = " (tcp ? base + 5 : base + 1 + node); next }
		/^peer_port *=/ { print "peer_port = " base + 6; next }
		/^guard_port *=/ { print "guard_port = " base + 7; next }
		/^netns *=/ { sub(/apus/, ns) }
		/^address *=/ && tcp { sub(/10\.77\.0\./, subnet ".") }
		{ print }' node=-1 >"$out"
}

app_bench_setup() {
	local app=$1 shm_base=$2 tcp_base=$3 prefix=$4 subnet=$5
	work=$(mktemp -d "/tmp/apus-$app-bench-XXXXXX")
	app_bench_conf "$PWD/apps/$app/cluster-shm.conf" "$work/shm.conf" "$work/shm" -v base="$shm_base" -v tcp=0
	app_bench_conf "$PWD/apps/$app/cluster-tcp.conf" "$work/tcp.conf" "$work/tcp" -v base="$tcp_base" \
		-v tcp=1 -v ns="$prefix" -v subnet="$subnet"
	export APUS_NETNS_PREFIX=$prefix APUS_NETNS_SUBNET=$subnet
	systems="apus-shm apus-tcp"
	netns_made=0
	if [ "$(id -u)" -eq 0 ] && bash scripts/netns.sh up 3 >/dev/null 2>&1; then
		netns_made=1
	else
		echo "apus-tcp: skipped (needs root and ip netns)"
		systems="apus-shm"
	fi
	declare -gA conf=([apus-shm]=$work/shm.conf [apus-tcp]=$work/tcp.conf)
	declare -gA host=([apus-shm]=127.0.0.1 [apus-tcp]=$subnet.1)
	declare -gA port=([apus-shm]=$((shm_base + 1)) [apus-tcp]=$((tcp_base + 5)))
	bare_pid=
	trap app_bench_cleanup EXIT
}

app_bench_cleanup() {
	[ -n "${bare_pid:-}" ] && kill "$bare_pid" 2>/dev/null
	"$apus" stop --config "$work/shm.conf" >/dev/null 2>&1 || true
	"$apus" stop --config "$work/tcp.conf" >/dev/null 2>&1 || true
	[ "$netns_made" -eq 1 ] && bash scripts/netns.sh down >/dev/null 2>&1
	bash scripts/drop-regions.sh "$work" >/dev/null 2>&1 || true
	rm -rf "$work"
}

# wait_serving HOST PORT - until the app's own probe `serving HOST PORT`
# (defined by the bench) succeeds, 60 s at most.
wait_serving() {
	local i
	for ((i = 0; i < 300; i++)); do serving "$1" "$2" && return 0; sleep 0.2; done
	echo "bench.sh: nothing answers on $1:$2" >&2
	return 1
}
