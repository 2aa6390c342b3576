#!/usr/bin/env bash
# CHECKSUM TABLE of the sbtest tables on every replica, read over each
# replica's own unix socket (<data_dir>/mysqld.sock: not replicated, so the
# read is local to that replica and adds nothing to the log).
#
#   checksum.sh --config C [--up] [--tables "sbtest.sbtest1 sbtest.sbtest2"]
#
# Prints one line per node: "<node> <table>=<checksum> ..." (a node that
# does not answer prints "<node> unreachable").  Exits 0 when every node
# answered and all lines agree, 1 otherwise.  With no --tables, every base
# table of the database sbtest is summed (as the first node that answers
# lists them).  A node that is down counts as a disagreement (exit 1): pass
# --up to compare only the nodes that answer.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
config="" tables="" up=0
while [ $# -gt 0 ]; do
	case $1 in
	--config) config=$2; shift 2 ;;
	--tables) tables=$2; shift 2 ;;
	--up) up=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "checksum.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
[ -n "$config" ] && [ -f "$config" ] || { echo "checksum.sh: --config FILE is required" >&2; exit 2; }

# "<id> <data_dir>" for every [node N] section.
# shellcheck source=scripts/node-dirs.sh
. "$(dirname "$0")/../../scripts/node-dirs.sh"
mapfile -t nodes < <(node_dirs "$config")
sock_of() { echo "$1/mysqld.sock"; }
q() { timeout 60 mariadb --no-defaults -S "$1" -u root -N -B -e "$2" 2>/dev/null; }

if [ -z "$tables" ]; then
	for nd in "${nodes[@]}"; do
		read -r _ d <<<"$nd"
		tables=$(q "$(sock_of "$d")" "SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables
			WHERE table_schema = 'sbtest' AND table_type = 'BASE TABLE' ORDER BY table_name" | tr '\n' ' ')
		tables=${tables% }
		[ -n "$tables" ] && break
	done
	[ -n "$tables" ] || { echo "checksum.sh: no node lists tables in sbtest" >&2; exit 1; }
fi
list=$(tr ' ' ',' <<<"$tables")

first="" rc=0 answered=0
for nd in "${nodes[@]}"; do
	read -r id d <<<"$nd"
	out=$(q "$(sock_of "$d")" "CHECKSUM TABLE $list") || out=""
	if [ -z "$out" ]; then
		echo "$id unreachable"
		[ "$up" -eq 1 ] || rc=1
		continue
	fi
	line=$(awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $1, $2 }' <<<"$out")
	echo "$id $line"
	answered=$((answered + 1))
	if [ -z "$first" ]; then
		first=$line
	elif [ "$line" != "$first" ]; then
		rc=1
	fi
done
[ "$answered" -gt 0 ] || rc=1
exit $rc
