#!/usr/bin/env bash
# A local multi-host network: each replica in its own network namespace
# with its own address on one bridge, as on separate machines (the same
# application port everywhere). Also cuts and heals links, for fault tests.
#
#   scripts/netns.sh up [N]          create N namespaces (default 3); idempotent
#   scripts/netns.sh down            remove them and the bridge
#   scripts/netns.sh addr I          address of replica I
#   scripts/netns.sh name I          namespace name of replica I
#   scripts/netns.sh exec I CMD...   run CMD inside replica I's namespace
#   scripts/netns.sh partition I     cut replica I off (its link goes down);
#                                    I may also be its namespace's name
#   scripts/netns.sh heal I          reconnect replica I
#   scripts/netns.sh status          namespaces, addresses, link states
#   scripts/netns.sh loopback CONF   print CONF with its nodes moved to loopback
#                                    addresses (no netns; ports made distinct)
#
# Environment: APUS_NETNS_PREFIX (default apus: namespaces apus0.., bridge
# apusbr, links apusv0..) and APUS_NETNS_SUBNET (default 10.77.0: replica I
# is 10.77.0.(I+1), the bridge, reachable from this host, is 10.77.0.254).
# Needs root (ip netns).
set -euo pipefail

PREFIX=${APUS_NETNS_PREFIX:-apus}
SUBNET=${APUS_NETNS_SUBNET:-10.77.0}
BRIDGE=${PREFIX}br
MAX=16

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

die() {
	echo "netns.sh: $*" >&2
	exit 1
}

index() {
	[[ "${1:-}" =~ ^[0-9]+$ ]] && [ "$1" -lt "$MAX" ] || die "replica index must be 0..$((MAX - 1)), got '${1:-}'"
}

ns_name() { echo "$PREFIX$1"; }
link_name() { echo "${PREFIX}v$1"; }
addr_of() { echo "$SUBNET.$(($1 + 1))"; }

exists() { [ -e "/var/run/netns/$(ns_name "$1")" ]; }

up() {
	local n=${1:-3} i ns link
	[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le "$MAX" ] || die "N must be 1..$MAX"
	[ "$(id -u)" -eq 0 ] || die "needs root (ip netns)"
	command -v ip >/dev/null || die "ip not found (apt-get install iproute2)"
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		ip addr add "$SUBNET.254/24" dev "$BRIDGE"
	fi
	ip link set "$BRIDGE" up
	for ((i = 0; i < n; i++)); do
		ns=$(ns_name "$i")
		link=$(link_name "$i")
		exists "$i" || ip netns add "$ns"
		ip -n "$ns" link set lo up
		if ! ip link show "$link" >/dev/null 2>&1; then
			ip link add "$link" type veth peer name "${link}p"
			ip link set "${link}p" netns "$ns"
			ip -n "$ns" link set "${link}p" name eth0
			ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0
			ip link set "$link" master "$BRIDGE"
		fi
		ip -n "$ns" link set eth0 up
		ip link set "$link" up
	done
}

down() {
	local i
	for ((i = 0; i < MAX; i++)); do
		if exists "$i"; then
			# Processes left inside would keep the namespace alive.
			ip netns pids "$(ns_name "$i")" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
			ip netns del "$(ns_name "$i")"
		fi
		ip link del "$(link_name "$i")" 2>/dev/null || true
	done
	ip link del "$BRIDGE" 2>/dev/null || true
}

status() {
	local i state
	for ((i = 0; i < MAX; i++)); do
		exists "$i" || continue
		state=$(cat "/sys/class/net/$(link_name "$i")/operstate" 2>/dev/null || echo missing)
		echo "replica $i: namespace $(ns_name "$i"), address $(addr_of "$i"), link $state"
	done
}

# A namespaced config for hosts without namespaces: 127.0.0.1 everywhere,
# so each node gets app_port+1+i, peer_port+1+i and guard_port+1+i of
# the first node's.
loopback() {
	local conf=${1:?usage: netns.sh loopback CONF}
	[ -r "$conf" ] || die "cannot read $conf"
	awk '
		function val(line) { sub(/^[^=]*=[[:space:]]*/, "", line); sub(/[[:space:]]+$/, "", line); return line }
		/^[[:space:]]*\[node / { node++ }
		/^[[:space:]]*app_port[[:space:]]*=/ { if (!app) app = val($0); if (node) next }
		/^[[:space:]]*peer_port[[:space:]]*=/ { if (!peer) peer = val($0); if (node) next }
		/^[[:space:]]*guard_port[[:space:]]*=/ { if (!gport) gport = val($0); if (node) next }
		/^[[:space:]]*metrics_port[[:space:]]*=/ { if (!mport) mport = val($0); if (node) next }
		{ lines[++n] = $0; sect[n] = node }
		END {
			for (i = 1; i <= n; i++) {
				l = lines[i]
				if (l ~ /^[[:space:]]*netns[[:space:]]*=/) continue
				if (l ~ /^[[:space:]]*address[[:space:]]*=/) l = "address  = 127.0.0.1"
				print l
				if (l ~ /^[[:space:]]*\[node /) {
					print "app_port = " app + sect[i]
					if (peer) print "peer_port = " peer + sect[i]
					if (gport) print "guard_port = " gport + sect[i]
					if (mport) print "metrics_port = " mport + sect[i]
				}
			}
		}' "$conf"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
up) up "$@" ;;
down) down ;;
addr) index "${1:-}"; addr_of "$1" ;;
name) index "${1:-}"; ns_name "$1" ;;
exec)
	index "${1:-}"
	exists "$1" || die "replica $1 has no namespace (run: $0 up)"
	ns=$(ns_name "$1")
	shift
	exec ip netns exec "$ns" "$@"
	;;
partition | heal)
	# A namespace name of ours stands for its index.
	i=${1:-}
	[[ "$i" == "$PREFIX"* ]] && [[ "${i#"$PREFIX"}" =~ ^[0-9]+$ ]] && i=${i#"$PREFIX"}
	set -- "$i"
	index "${1:-}"
	exists "$1" || die "replica $1 has no namespace (run: $0 up)"
	ip link set "$(link_name "$1")" "$([ "$cmd" = partition ] && echo down || echo up)"
	;;
status) status ;;
loopback) loopback "$@" ;;
-h | --help | help) usage ;;
*)
	usage >&2
	exit 2
	;;
esac
