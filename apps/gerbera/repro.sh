#!/usr/bin/env bash
# The four experiments of README.md, against a 3-replica gerbera cluster
# (cluster-shm.conf unless --config), each printing its evidence:
#
#   repro.sh [--config C] [readonly|session|autoscan|ssdp]...   (default: all four)
#
#   readonly  Browse and description.xml only, on a database made once:
#             the databases stay equal, the replies that carry a URL differ
#   session   a web UI session (get_sid) and one add_object: the backups
#             answer "invalid session id", the object is on the leader only
#   autoscan  the media folder as an inotify autoscan directory; 8 files
#             copied into it while a client browses: other object IDs on
#             every replica
#   ssdp      one M-SEARCH: every replica answers, each with its own URL
#
# Each starts the cluster afresh (init.sh --force: it wipes the nodes'
# data_dirs) and stops it; at exit the nodes' memory regions are dropped.  Run from anywhere; apus is ../../build/bin/apus
# unless APUS_BIN is set.  Needs gerbera, curl, sqlite3, python3.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
APUS=${APUS_BIN:-$here/../../build/bin/apus}
C=$here/cluster-shm.conf
if [ "${1:-}" = --config ]; then C=$2; shift 2; fi
. "$here/../../scripts/node-dirs.sh"
mapfile -t DIRS < <(node_dirs "$C" | cut -d' ' -f2-)
MEDIA=/tmp/apus-gerbera/media

leader() { # HOST:PORT of the leader
	"$APUS" status --config "$C" --json | python3 -c 'import json,sys
d=json.load(sys.stdin); l=d["leader"]
print([n for n in d["nodes"] if n["id"]==l][0]["app_addr"])'
}
settle() { # until every node applied what the leader committed (20 s at most)
	local i
	for i in $(seq 1 40); do
		"$APUS" status --config "$C" --json | python3 -c 'import json,sys
d=json.load(sys.stdin); a=[n.get("applied") for n in d["nodes"]]
sys.exit(0 if len(set(a))==1 else 1)' && break
		sleep 0.5
	done
	sleep 1
}
db() { sqlite3 "file:$1/gerbera.db?immutable=1" "$2"; }
start() {
	rm -f "$MEDIA"/music/new*.mp3
	"$here/init.sh" --config "$C" --force "$@" >/dev/null || exit 1
	timeout 120 "$APUS" start --config "$C" >/dev/null || exit 1
	L=$(leader)
}
stop() {
	settle
	echo "-- apus divergence: $(timeout 20 "$APUS" divergence --config "$C" | tail -n 1)"
	timeout 60 "$APUS" stop --config "$C" >/dev/null
}
cleanup() { # stop the cluster, drop its regions (a stopped node keeps log_size bytes of memory)
	local d
	timeout 60 "$APUS" stop --config "$C" >/dev/null 2>&1
	for d in "${DIRS[@]}"; do "$here/../../scripts/drop-regions.sh" "$d"; done
}
trap cleanup EXIT

readonly_() {
	echo "== readonly: 12 Browse + 1 description.xml through the leader $L"
	local id
	for id in 0 0 0 0 0 1 2 3 4 8 9 50; do "$here/browse.sh" "$L" $id >/dev/null; done
	curl -s -m 10 "http://$L/description.xml" | grep -o '<URLBase>.*</URLBase>'
	settle
	echo "-- connections whose output differs (node connection offset):"
	timeout 20 "$APUS" divergence --config "$C" | awk '$2 ~ /^2[0-9-]+$/ {print "  ", $1, $4, $5}'
	echo "-- sha256 of each node's gerbera.db (Browse writes nothing):"
	for d in "${DIRS[@]}"; do echo "   $d $(sha256sum <"$d/gerbera.db" | cut -c1-16)"; done
	stop
}

session_() {
	echo "== session: the web UI's JSON API through the leader $L"
	local u="http://$L/content/interface" sid
	sid=$(curl -s -m 10 "$u?req_type=auth&action=get_sid&sid=" | python3 -c 'import json,sys;print(json.load(sys.stdin)["sid"])')
	echo "-- leader's session id: $sid"
	echo "-- add_object: $(curl -s -m 10 "$u?req_type=add_object&parent_id=0&obj_type=container&title=Made1&class=object.container&sid=$sid")"
	curl -s -m 10 "$u?req_type=containers&parent_id=0&select_it=0&sid=$sid" >/dev/null
	settle
	echo "-- what the backups answered (apus divergence, output before the offset):"
	timeout 20 "$APUS" divergence --config "$C" | awk '$2 ~ /^2[0-9-]+$/ {print "   node " $1 ", connection " $4 ", at byte " $5 ": ..." substr($0, index($0, $9))}'
	echo "-- container 'Made1' in each node's database:"
	for d in "${DIRS[@]}"; do echo "   $d: $(db "$d" "select count(*) from mt_cds_object where dc_title='Made1'")"; done
	stop
}

autoscan_() {
	echo "== autoscan: 8 files copied into $MEDIA/music (inotify), a Browse of it after each, through $L"
	local i
	for i in $(seq 1 8); do
		cp "$MEDIA/music/track0.mp3" "$MEDIA/music/new$i.mp3"
		"$here/browse.sh" "$L" 6 | grep -o 'NumberReturned>[0-9]*' | head -n 1 | sed 's/.*>/   leader listed /'
	done
	sleep 2; settle
	echo "-- object IDs of the new files (and rows in the database), per node:"
	for d in "${DIRS[@]}"; do
		echo "   $d: $(db "$d" "select group_concat(id, ' ') from (select id from mt_cds_object where location like '%/new%' order by id)") ($(db "$d" "select count(*) from mt_cds_object") rows)"
	done
	stop
	rm -f "$MEDIA"/music/new*.mp3
}

ssdp_() {
	echo "== ssdp: one M-SEARCH for MediaServer:1"
	python3 "$here/msearch.py" "${L%:*}" | sed 's/^/   /'
	stop
}

[ $# -gt 0 ] || set -- readonly session autoscan ssdp
for x in "$@"; do
	case $x in
	autoscan) start --autoscan ;;
	readonly | session | ssdp) start ;;
	*) echo "repro.sh: unknown experiment '$x'" >&2; exit 2 ;;
	esac
	"${x}_"
done
