#!/usr/bin/env bash
# A MariaDB client that remembers what it was promised, for failover tests.
#
#   audit.sh write --config C --log FILE [--count N] [--table T]
#       N times (default 1000): INSERT INTO sbtest.<T> (id, v) VALUES (i, i)
#       through the leader (found with `apus status`, APUS_BIN, default
#       build/bin/apus), one mariadb client per statement (autocommit: its
#       exit status 0 means the transaction committed).  Logs "ok <i>" for
#       every acknowledged insert, "fail <i> ..." for the others; after a
#       failure it waits (0.1 s more per failure in a row, up to 1 s),
#       finds the leader again and goes on with the next i.
#       Creates the table (InnoDB) first when it is missing.
#   audit.sh check --config C --log FILE [--table T]
#       On every replica that answers on its unix socket (not replicated):
#       every acknowledged id is present, and no id is present that was
#       never attempted.  One line per node; exits 0 when clean on every
#       node that answered (and at least one did), 1 otherwise.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
cmd=${1:-}
[ $# -gt 0 ] && shift
config="" log="" count=1000 table=audit
APUS_BIN=${APUS_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin/apus}
while [ $# -gt 0 ]; do
	case $1 in
	--config) config=$2; shift 2 ;;
	--log) log=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--table) table=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "audit.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
case $cmd in write | check) ;; -h | --help) usage; exit 0 ;; *) usage >&2; exit 2 ;; esac
[ -n "$config" ] && [ -f "$config" ] && [ -n "$log" ] ||
	{ echo "audit.sh: --config FILE and --log FILE are required" >&2; exit 2; }
[[ "$count" =~ ^[0-9]+$ ]] || { echo "audit.sh: --count must be a number" >&2; exit 2; }
[[ "$table" =~ ^[A-Za-z0-9_]+$ ]] || { echo "audit.sh: bad table name" >&2; exit 2; }

host="" port=""
# find_leader - host and port of the serving leader per apus status.
find_leader() {
	local j id addr
	j=$("$APUS_BIN" status --config "$config" --json 2>/dev/null | tr -d ' \t\r\n') || return 1
	id=$(sed 's/{[^{}]*}//g' <<<"$j" | grep -o '"leader":[0-9]*' | cut -d: -f2)
	[ -n "$id" ] || return 1
	addr=$(grep -o "{\"id\":$id,[^{}]*}" <<<"$j" | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
	[ -n "$addr" ] || return 1
	host=${addr%:*} port=${addr##*:}
}
sql() {
	timeout 10 mariadb --no-defaults --connect-timeout=5 -h "$host" -P "$port" -u sbtest \
		-N -B sbtest -e "$1" 2>&1
}

if [ "$cmd" = write ]; then
	for ((i = 0; i < 100; i++)); do find_leader && break; sleep 0.1; done
	[ -n "$port" ] || { echo "audit.sh: no leader" >&2; exit 1; }
	# The leader ends a connection whose input waited a second for room in
	# a full log (snapshot_connections = none): try again, as for inserts.
	for ((i = 1; ; i++)); do
		out=$(sql "CREATE TABLE IF NOT EXISTS $table (id INT PRIMARY KEY, v INT) ENGINE=InnoDB") && break
		[ "$i" -lt 10 ] || { echo "audit.sh: cannot create $table: $out" >&2; exit 1; }
		sleep 0.5
		find_leader || true
	done
	fails=0
	for ((i = 1; i <= count; i++)); do
		if out=$(sql "INSERT INTO $table (id, v) VALUES ($i, $i)"); then
			echo "ok $i"
			fails=0
		else
			echo "fail $i $(tr '\n' ' ' <<<"$out")"
			# A new leader refuses clients until it executed what the old
			# one logged (seconds on a loaded machine): back off, 0.1 s more
			# per failure in a row up to 1 s, so that the inserts left are
			# not all spent on its catch-up.
			fails=$((fails < 10 ? fails + 1 : 10))
			sleep "$((fails / 10)).$((fails % 10))"
			for ((k = 0; k < 50; k++)); do find_leader && break; sleep 0.1; done
		fi
	done >>"$log"
	exit 0
fi

# shellcheck source=scripts/node-dirs.sh
. "$(dirname "$0")/../../scripts/node-dirs.sh"
mapfile -t nodes < <(node_dirs "$config")
acked=$(grep -c '^ok ' "$log" || true)
tried=$(grep -cE '^(ok|fail) ' "$log" || true)
answered=0 bad=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for nd in "${nodes[@]}"; do
	read -r id d <<<"$nd"
	if ! timeout 30 mariadb --no-defaults -S "$d/mysqld.sock" -u root -N -B \
		-e "SELECT id FROM sbtest.$table ORDER BY id" >"$tmp" 2>/dev/null; then
		echo "node $id: no answer on $d/mysqld.sock"
		continue
	fi
	answered=$((answered + 1))
	missing=$(grep '^ok ' "$log" | cut -d' ' -f2 | sort | comm -23 - <(sort "$tmp") | wc -l)
	extra=$(grep -E '^(ok|fail) ' "$log" | cut -d' ' -f2 | sort | comm -13 - <(sort "$tmp") | wc -l)
	rows=$(wc -l <"$tmp")
	echo "node $id: $rows rows; $acked acknowledged ($missing missing), $tried attempted ($extra never attempted)"
	[ "$missing" -eq 0 ] && [ "$extra" -eq 0 ] || bad=1
done
[ "$answered" -gt 0 ] && [ "$bad" -eq 0 ]
