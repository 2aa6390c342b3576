#!/bin/sh
# snapshot_cmd for Redis: a fork-based snapshot (BGSAVE) of the server
# behind the admin socket SOCK, waited for until dump.rdb is complete.
#
#   snapshot.sh SOCK
#
# apus ties the snapshot to a log entry at the server's fork (the leader is
# never paused; a backup holds only until the fork), so this makes the
# server fork once: BGSAVE, retried while another save runs or while the
# server still loads its dataset (a replica just rebuilt or restarted
# follows its log while Redis loads; BGSAVE then says LOADING).  Exits 0
# once that save succeeded, non-zero otherwise.
#
# It never outlives its server for long: a server that stops answering
# (killed, or stopped by a signal) ends it within seconds, and it gives up
# after SNAPSHOT_TIMEOUT_S (600) seconds in all.
set -u
sock=${1:?usage: snapshot.sh SOCK}
limit=${SNAPSHOT_TIMEOUT_S:-600}
deadline=$(($(date +%s) + limit))
# A stopped server would hold redis-cli (it has no timeout of its own).
cli() { timeout 10 redis-cli -s "$sock" "$@"; }

tries=0
until out=$(cli BGSAVE) && [ "$out" = "Background saving started" ]; do
	case $out in
	*"in progress"* | LOADING*) ;;
	*) echo "snapshot.sh: BGSAVE: $out" >&2; exit 1 ;;
	esac
	tries=$((tries + 1))
	[ $tries -lt 600 ] || { echo "snapshot.sh: BGSAVE: $out (for 30 s)" >&2; exit 1; }
	sleep 0.05
done
gone=0
while :; do
	if info=$(cli INFO persistence); then
		gone=0
	else
		gone=$((gone + 1))
		[ $gone -lt 3 ] || { echo "snapshot.sh: the server does not answer: $info" >&2; exit 1; }
	fi
	state=$(printf '%s\n' "$info" | tr -d '\r' | grep -E '^rdb_(bgsave_in_progress|last_bgsave_status):')
	case $state in
	*"in_progress:0"*"status:ok"*) exit 0 ;;
	*"in_progress:0"*) echo "snapshot.sh: BGSAVE failed" >&2; exit 1 ;;
	esac
	[ "$(date +%s)" -lt "$deadline" ] || { echo "snapshot.sh: BGSAVE did not finish in $limit s" >&2; exit 1; }
	sleep 0.02
done
