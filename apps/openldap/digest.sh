#!/usr/bin/env bash
# A digest of each replica's database, read locally with slapcat (MDB
# allows it while slapd runs; nothing goes through the replicated port).
#
#   digest.sh --config C [--up] [--raw] [--dump DIR]
#
# Prints one line per node: "<node> <sha256> <entries>" (a node whose
# slapcat fails prints "<node> unreadable").  Exits 0 when every node was
# read and all digests agree, 1 otherwise (--up: compare only the nodes
# that could be read).
#
# Filtered (unless --raw): entryUUID is cut to its time fields.  slapd
# makes version-1 UUIDs: time_low-time_mid-time_hi (the clock, which is a
# log input, equal on every replica) then a clock sequence and a node id
# that each slapd process draws once from /dev/urandom with open()+read()
# (liblutil's lutil_entropy), which the shim does not make a log input:
# those two fields differ between replicas, and between two runs of one.
# Nothing else is filtered: createTimestamp, modifyTimestamp and entryCSN
# come from the clock read in the request's window and are compared as
# they are.  slapcat lists entries in entry-id order, itself the order of
# the adds: it is compared too.  --dump DIR keeps each node's filtered
# LDIF as DIR/node<N>.ldif.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
config="" up=0 raw=0 dump=""
while [ $# -gt 0 ]; do
	case $1 in
	--config) config=$2; shift 2 ;;
	--up) up=1; shift ;;
	--raw) raw=1; shift ;;
	--dump) dump=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "digest.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
[ -n "$config" ] && [ -f "$config" ] || { echo "digest.sh: --config FILE is required" >&2; exit 2; }
PATH=$PATH:/usr/sbin
# shellcheck source=scripts/node-dirs.sh
. "$(dirname "$0")/../../scripts/node-dirs.sh"
mapfile -t nodes < <(node_dirs "$config")
[ -n "$dump" ] && mkdir -p "$dump"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

first="" rc=0 answered=0
for nd in "${nodes[@]}"; do
	read -r id d <<<"$nd"
	if ! timeout 60 slapcat -f "$d/slapd.conf" -o ldif-wrap=no >"$tmp" 2>/dev/null || [ ! -s "$tmp" ]; then
		echo "$id unreadable"
		[ "$up" -eq 1 ] || rc=1
		continue
	fi
	if [ "$raw" -eq 0 ]; then
		sed -i -E 's/^(entryUUID: [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4})-.*/\1/' "$tmp"
	fi
	[ -n "$dump" ] && cp "$tmp" "$dump/node$id.ldif"
	sum=$(sha256sum <"$tmp" | cut -c1-64)
	echo "$id $sum $(grep -c '^dn: ' "$tmp")"
	answered=$((answered + 1))
	if [ -z "$first" ]; then
		first=$sum
	elif [ "$sum" != "$first" ]; then
		rc=1
	fi
done
[ "$answered" -gt 0 ] || rc=1
exit $rc
