#!/usr/bin/env bash
# MariaDB's recovery, measured side by side in one run:
#   apus restart      3 replicas as shipped (apps/mariadb/cluster-shm.conf:
#                     guard on, app_reset_cmd, backups' dumps as recovery
#                     points, load.sh at start), ROWS rows inserted through
#                     the leader so that the log wrapped; then kill -9 of
#                     every server (the guards bring them back) and apus
#                     stop + apus start: seconds until a leader serves every
#                     row, and until every node is back, recoverable and
#                     equal (CHECKSUM TABLE)
#   bare cold start   mariadbd restarting on a copy of a stopped replica's
#                     datadir (its own restart: InnoDB keeps its state),
#                     and a fresh mariadbd on the template given a
#                     backup's dump with load.sh (what a node's restart does)
#   leader throughput the inserts' rows/s with recovery points taken and on a
#                     cluster without snapshot_cmd: the ratio
#
#   apps/mariadb/recovery-bench.sh [ROWS] [SIZE] [LOG]
#     ROWS rows of SIZE bytes (default 100000 of 1000), 100 to a REPLACE,
#     a client connection each; LOG the log's size (default 16M).
#
# Ports 20620-20639 (apus app 20621-20623, bare 20625 and 20626).
set -euo pipefail
cd "$(dirname "$0")/../.."

case ${1:-} in -h | --help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;; esac
rows=${1:-100000}
size=${2:-1000}
log=${3:-16M}
[[ "$rows" =~ ^[1-9][0-9]*$ && "$size" =~ ^[1-9][0-9]*$ && "$log" =~ ^[1-9][0-9]*[KMG]?$ ]] ||
	{ echo "usage: apps/mariadb/recovery-bench.sh [ROWS] [SIZE] [LOG]" >&2; exit 2; }
make -s all
apus=build/bin/apus
mdb=apps/mariadb
work=$(mktemp -d /tmp/apus-mdb-rbench-XXXXXX)

conf=$work/shm.conf
sed -e "s#/tmp/apus-mariadb/#$work/#" -e 's/= 3307$/= 20621/' -e 's/= 3308$/= 20622/' \
	-e 's/= 3309$/= 20623/' -e "s/^log_size .*/log_size = $log/" \
	-e 's/^cluster .*/cluster = mdbrbench/' -e "s#{config_dir}#$PWD/$mdb#g" $mdb/cluster-shm.conf >"$conf"
sed -e '/^snapshot_/d' -e 's/^cluster .*/cluster = mdbrbench-none/' -e "s#$work/node#$work/none/node#" \
	"$conf" >"$work/none.conf"

# shellcheck source=../../scripts/bench/recovery-lib.bash
. scripts/bench/recovery-lib.bash
sql() { # HOST PORT [mariadb's arguments]: the sbtest database through HOST:PORT
	local h=$1 p=$2
	shift 2
	timeout 120 mariadb --no-defaults --connect-timeout=5 -h "$h" -P "$p" -u sbtest -N -B sbtest "$@"
}
# fill - ROWS rows of SIZE bytes through the leader, a client per 100-row
# REPLACE; prints the rows/s.  A statement that fails is sent again (to
# the leader of then): with snapshot_connections = none a client whose
# input waits for log room over 1 s is disconnected, untold.
fill() {
	local i t0 a tries
	t0=$(now_ms)
	for ((i = 0; i < rows; i += 100)); do
		for ((tries = 0; ; tries++)); do
			a=$(leader_addr) &&
				awk -v from=$i -v to=$((i + 100 < rows ? i + 100 : rows)) -v size="$size" 'BEGIN {
					pad = sprintf("%*s", size, ""); gsub(/ /, "x", pad)
					if (from == 0) print "CREATE TABLE IF NOT EXISTS rb (id INT PRIMARY KEY, v LONGTEXT) ENGINE=InnoDB;"
					s = "REPLACE INTO rb VALUES "
					for (k = from; k < to; k++)
						s = s (k > from ? "," : "") "(" k ",\x27" pad "\x27)"
					print s ";"
				}' | sql "${a%:*}" "${a##*:}" 2>"$work/fill.err" && break
			[ "$tries" -lt 30 ] || { tail -c 300 "$work/fill.err" >&2; return 1; }
			sleep 0.5
		done
	done
	awk -v n="$rows" -v ms=$(($(now_ms) - t0)) 'BEGIN { printf "%.0f\n", n * 1000 / ms }'
}
count() { sql "$1" "$2" -e "SELECT COUNT(*) FROM rb" 2>/dev/null; }
serving() { # a leader answers and holds ROWS rows
	local a
	a=$(leader_addr) || return 1
	[ "$(count "${a%:*}" "${a##*:}")" = "$rows" ]
}
all_back() { # every node recoverable, one leader, equal CHECKSUM TABLE
	all_recoverable && $mdb/checksum.sh --config "$conf" --tables sbtest.rb >/dev/null 2>&1
}
bare_pid=""
bare() { # DIR PORT: mariadbd on DIR/db, waited for until it answers
	/usr/sbin/mariadbd --no-defaults --datadir="$1/db" --socket="$1/mysqld.sock" --port="$2" \
		--bind-address=127.0.0.1 --user=root --pid-file="$1/mariadbd.pid" --skip-name-resolve \
		--innodb-buffer-pool-size=64M --max-connections=64 --log-error="$1/error.log" 2>>"$1/error.log" 3>&- &
	bare_pid=$!
	until mariadb --no-defaults -S "$1/mysqld.sock" -u root -e 'SELECT 1' >/dev/null 2>&1; do sleep 0.02; done
}
unbare() {
	[ -n "$bare_pid" ] || return 0
	kill "$bare_pid" 2>/dev/null || true
	wait "$bare_pid" 2>/dev/null || true
	bare_pid=""
}
cleanup() {
	unbare
	"$apus" stop --config "$conf" >/dev/null 2>&1 3>&- || true
	"$apus" stop --config "$work/none.conf" >/dev/null 2>&1 3>&- || true
	sleep 0.5
	bash scripts/drop-regions.sh "$work"
	rm -rf "$work"
}
trap cleanup EXIT

echo "MariaDB recovery, $rows rows of $size B, log $log; $(nproc) cores, $(date -u +%F)"
echo
table_head
# apus as shipped.
init() { $mdb/init.sh --config "$1" >"$work/init.out" 2>&1 || { cat "$work/init.out" >&2; return 1; }; }
init "$conf"
"$apus" start --config "$conf" >/dev/null 3>&-
on=$(fill)
wait_for all_back >/dev/null
kill_all
row "apus, kill -9 of all: a leader serves all $rows rows" "$(wait_for serving)"
row "apus, kill -9 of all: every node back, equal" "$(wait_for all_back)"
row "apus stop + apus start: apus start returns" "$(stop_start)"
row "apus stop + apus start: then a leader serves all rows" "$(wait_for serving)"
row "apus stop + apus start: then every node back, equal" "$(wait_for all_back)"
b=$((($(leader_node) + 1) % 3))
"$apus" stop --config "$conf" >/dev/null 3>&-

# Bare: mariadbd's own restart on a copy of backup b's datadir; then a
# fresh one on the template given b's dump (reset.sh + load.sh).
mkdir -p "$work/bare" "$work/fresh"
cp -a "$work/node$b/db" "$work/bare/db"
cp -a "$work/node$b/db.template" "$work/fresh/db"
t0=$(now_ms)
bare "$work/bare" 20625
row "bare mariadbd restart on a datadir of $rows rows ($(du -sm "$work/bare/db" | cut -f1) MB)" "$(since "$t0")"
unbare
t0=$(now_ms)
bare "$work/fresh" 20626
$mdb/load.sh "$work/fresh/mysqld.sock" "$work/node$b/mariadb.snap" >/dev/null
row "bare mariadbd on the template + load.sh of a dump ($(($(stat -c %s "$work/node$b/mariadb.snap") / 1000000)) MB)" "$(since "$t0")"
unbare

# Leader throughput without recovery points, on a fresh cluster.
init "$work/none.conf"
"$apus" start --config "$work/none.conf" >/dev/null 3>&-
off=$(conf=$work/none.conf fill)
"$apus" stop --config "$work/none.conf" >/dev/null 3>&-
echo
echo "leader rows/s inserted: none $off; recovery points taken $on (ratio $(ratio "$on" "$off"))"
