#!/usr/bin/env bash
# A virtual IP that follows the leader (keepalived-style), as a leader_hook:
#
#   leader_hook = /path/to/vip.sh 10.79.0.100/24 [DEV]
#
# On the node that has just become leader (APUS_CONFIG and APUS_LEADER in
# its environment, as apus runs the hook):
#   1. removes the address from the other nodes of the config that run in a
#      network namespace of this host (netns = NAME: ip -n NAME addr del);
#   2. adds it to DEV (default: the interface that holds the node's own
#      address) with ip addr replace;
#   3. announces it with gratuitous ARP (arping of iputils-arping, -U and
#      -A) so that neighbours send to this node's MAC at once; without it,
#      says so and neighbours learn only when their ARP entry expires.
# Idempotent: safe to run again. IPv4 only.
#
#   vip.sh --release ADDR/PREFIX [DEV]   remove the address from this host
#                                        (or namespace): for a deposed or
#                                        restarted leader on a separate host
#   vip.sh --help
#
# Nodes on other hosts are out of its reach: a dead host stops answering ARP
# for the address, but a live host whose server died or was deposed keeps it
# until it runs --release (see doc/operator-guide.md, "A virtual IP that
# follows the leader"). Every line it prints starts with "vip.sh:", in the node's apus.log.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

say() { echo "vip.sh: ${APUS_VIEW:+view $APUS_VIEW: }$*"; }
die() {
	say "$*" >&2
	exit 1
}

release=0
case ${1:-} in
-h | --help) usage; exit 0 ;;
--release) release=1; shift ;;
-*) die "unknown option '$1' (usage: vip.sh [--release] ADDR/PREFIX [DEV]; --help)" ;;
esac
[ $# -eq 1 ] || [ $# -eq 2 ] || die "usage: vip.sh [--release] ADDR/PREFIX [DEV] (--help)"
cidr=$1 dev=${2:-}

# An IPv4 address with a prefix length: a.b.c.d/n, each part in range.
valid_cidr() {
	local a b c d n
	[[ "$1" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/([0-9]{1,2})$ ]] || return 1
	a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} c=${BASH_REMATCH[3]} d=${BASH_REMATCH[4]} n=${BASH_REMATCH[5]}
	[ $((10#$a)) -le 255 ] && [ $((10#$b)) -le 255 ] && [ $((10#$c)) -le 255 ] &&
		[ $((10#$d)) -le 255 ] && [ $((10#$n)) -ge 1 ] && [ $((10#$n)) -le 32 ]
}
valid_cidr "$cidr" || die "'$cidr' is not an IPv4 address with a prefix length (e.g. 10.79.0.100/24)"
vip=${cidr%/*}
if [ -n "$dev" ] && ! [[ "$dev" =~ ^[A-Za-z0-9_.@:-]{1,15}$ ]]; then
	die "'$dev' is not an interface name"
fi
command -v ip >/dev/null || die "ip not found (apt-get install iproute2)"

# holders [ip args] - "DEV ADDR/PREFIX" for each interface holding the VIP.
holders() {
	ip "$@" -o -4 addr show | awk -v vip="$vip" '
		{ for (i = 1; i < NF; i++) if ($i == "inet") { split($(i + 1), a, "/"); if (a[1] == vip) print $2, $(i + 1) } }'
}

# drop WHERE [ip args] - remove the VIP from every interface that holds it.
drop() {
	local where=$1 d a
	shift
	while read -r d a; do
		[ -n "$dev" ] && [ "$release" -eq 1 ] && [ "$d" != "$dev" ] && continue
		if ip "$@" addr del "$a" dev "$d" 2>/dev/null; then
			say "removed $a from $d $where"
			removed=$((removed + 1))
		elif [[ $'\n'"$(holders "$@")" == *$'\n'"$d "* ]]; then
			say "could not remove $a from $d $where" >&2
			return 1
		fi
	done < <(holders "$@")
}

removed=0
if [ "$release" -eq 1 ]; then
	drop "here"
	[ "$removed" -gt 0 ] || say "$vip is not held ${dev:+on $dev }here"
	exit 0
fi

conf=${APUS_CONFIG:-} self=${APUS_LEADER:-}
[ -r "${conf:-/nonexistent}" ] || die "APUS_CONFIG is not a readable config ('$conf'): run me as leader_hook, or use --release"
[[ "$self" =~ ^[0-9]+$ ]] || die "APUS_LEADER is not a node id ('$self'): run me as leader_hook"

# nodes - "ID ADDRESS NETNS" for each [node N] of the config ("-" when unset).
nodes() {
	awk '
		function flush() { if (id != "") print id, (addr == "" ? "127.0.0.1" : addr), (ns == "" ? "-" : ns) }
		/^[[:space:]]*\[/ {
			flush(); id = addr = ns = ""
			s = $0; gsub(/[][[:space:]]/, " ", s); split(s, f, " ")
			if (f[1] == "node") id = f[2]
			next
		}
		id != "" {
			line = $0; sub(/#.*/, "", line); eq = index(line, "="); if (!eq) next
			k = substr(line, 1, eq - 1); v = substr(line, eq + 1)
			gsub(/^[[:space:]]+|[[:space:]]+$/, "", k); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v)
			if (k == "address") addr = v; else if (k == "netns") ns = v
		}
		END { flush() }' "$conf"
}

# A VIP equal to a node's own address would be deleted from that node.
my_addr=""
while read -r id addr ns; do
	[ "$addr" = "$vip" ] && die "$vip is node $id's own address in $conf: choose a free address"
	[ "$id" = "$self" ] && my_addr=$addr
done < <(nodes)
[ -n "$my_addr" ] || die "node $self is not in $conf"

# 1. Take it from the other nodes in namespaces of this host. Ours (the
# hook runs in the leader's namespace) is recognised by its inode, in case
# two nodes share one.
here=$(stat -L -c %i /proc/self/ns/net)
while read -r id addr ns; do
	[ "$id" = "$self" ] || [ "$ns" = - ] && continue
	if [ ! -e "/var/run/netns/$ns" ]; then
		say "node $id's namespace $ns is not on this host: cannot remove $vip there"
		continue
	fi
	[ "$(stat -L -c %i "/var/run/netns/$ns")" = "$here" ] && continue
	drop "(node $id, namespace $ns)" -n "$ns" || true
done < <(nodes)

# 2. Hold it.
if [ -z "$dev" ]; then
	# awk reads to the end (no early exit): under pipefail, ip killed by
	# SIGPIPE would end this script with 141 and no word.
	dev=$(ip -o -4 addr show | awk -v a="$my_addr" '
		{ for (i = 1; i < NF; i++) if ($i == "inet") { split($(i + 1), p, "/"); if (p[1] == a && d == "") d = $2 } }
		END { if (d != "") print d }')
	dev=${dev%%@*}
	[ -n "$dev" ] || die "no interface here holds node $self's address $my_addr: give DEV"
fi
ip addr replace "$cidr" dev "$dev" || die "ip addr replace $cidr dev $dev failed"
say "node $self holds $cidr on $dev"

# 3. Announce it. Only iputils' arping has these flags (the other arping
# package differs).
if command -v arping >/dev/null && arping -V 2>&1 | grep iputils >/dev/null; then
	# -U: a gratuitous request, -A: a gratuitous reply (hosts differ in
	# which one updates their cache), both at once. Twice each, 1 s apart:
	# Linux ignores a change of a neighbour entry within locktime (1 s) of
	# its last one.
	arping -q -U -c 2 -I "$dev" "$vip" &
	req=$! ok=1
	arping -q -A -c 2 -I "$dev" "$vip" || ok=0
	wait "$req" || ok=0
	if [ "$ok" -eq 1 ]; then
		say "announced $vip on $dev (gratuitous ARP)"
	else
		say "arping failed: neighbours learn $vip's new MAC only as their ARP entries expire"
	fi
else
	say "no arping from iputils-arping: $vip not announced; neighbours learn its new MAC only as their ARP entries expire (apt-get install iputils-arping)"
fi
