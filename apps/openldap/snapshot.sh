#!/bin/sh
# snapshot_cmd for OpenLDAP: a replica's recovery point, the LDIF of its
# database.
#
#   snapshot.sh DATA_DIR OUT
#
# slapcat of <DATA_DIR>/db (through <DATA_DIR>/slapd.conf) while slapd
# runs: MDB gives a reader the last committed transaction, and apus holds
# the backup at one log entry meanwhile (snapshot_leader = off: reading is
# no fork, so the leader takes none).  Every entry comes with its
# operational attributes; reset.sh loads the file with slapadd when the
# node starts from this point.  Written to OUT.tmp, synced and renamed
# over OUT; prints the number of entries.
set -eu
dir=${1:?usage: snapshot.sh DATA_DIR OUT}
out=${2:?usage: snapshot.sh DATA_DIR OUT}
PATH=$PATH:/usr/sbin
slapcat -f "$dir/slapd.conf" -l "$out.tmp" 2>"$out.err" || {
	cat "$out.err" >&2
	rm -f "$out.tmp" "$out.err"
	exit 1
}
rm -f "$out.err"
sync "$out.tmp"
mv "$out.tmp" "$out"
echo "$(grep -c '^dn:' "$out") entries"
