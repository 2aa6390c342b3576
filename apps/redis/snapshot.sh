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
set -u
sock=${1:?usage: snapshot.sh SOCK}
cli() { redis-cli -s "$sock" "$@"; }

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
tries=0
while :; do
	state=$(cli INFO persistence | tr -d '\r' | grep -E '^rdb_(bgsave_in_progress|last_bgsave_status):')
	case $state in
	*"in_progress:0"*"status:ok"*) exit 0 ;;
	*"in_progress:0"*) echo "snapshot.sh: BGSAVE failed" >&2; exit 1 ;;
	esac
	tries=$((tries + 1))
	[ $tries -lt 60000 ] || { echo "snapshot.sh: BGSAVE did not finish" >&2; exit 1; }
	sleep 0.01
done
