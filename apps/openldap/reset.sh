#!/bin/sh
# app_reset_cmd for OpenLDAP: puts back the database the log starts from,
# before a fresh slapd starts on it.
#
#   reset.sh DATA_DIR
#
# slapd keeps its state on disk (MDB, <DATA_DIR>/db/data.mdb), but a fresh
# server of a replica must start from the state the log starts from.  When
# the node starts from a recovery point, apus names the point's LDIF
# (snapshot.sh's slapcat) in $APUS_RECOVERY_POINT: it is loaded with
# slapadd, which keeps every entry's operational attributes (entryUUID,
# entryCSN, timestamps) as they were.  Otherwise it is the database init.sh
# made (<DATA_DIR>/db.template), and the whole log follows.  What the
# previous slapd left in <DATA_DIR>/db is newer than either: it goes.  apus
# runs this in every fresh start of the server (apus start, the guard's
# restarts and rebuilds, a deposed leader's re-execution).  Exits 0 once
# <DATA_DIR>/db is that database.
set -eu
dir=${1:?usage: reset.sh DATA_DIR}
PATH=$PATH:/usr/sbin
# Built beside, then swapped in: a reset cut short leaves a copy to finish
# or the old database, never half of one.
rm -rf "$dir/db.new"
if [ -n "${APUS_RECOVERY_POINT:-}" ]; then
	[ -f "$APUS_RECOVERY_POINT" ] || {
		echo "reset.sh: the recovery point $APUS_RECOVERY_POINT is missing" >&2
		exit 1
	}
	mkdir "$dir/db.new"
	sed "s#^directory .*#directory $dir/db.new#" "$dir/slapd.conf" >"$dir/slapd.reset.conf"
	slapadd -q -f "$dir/slapd.reset.conf" -l "$APUS_RECOVERY_POINT" >"$dir/slapadd.log" 2>&1 || {
		cat "$dir/slapadd.log" >&2
		echo "reset.sh: slapadd of $APUS_RECOVERY_POINT failed" >&2
		exit 1
	}
	rm -f "$dir/db.new/lock.mdb" "$dir/slapd.reset.conf"
else
	[ -f "$dir/db.template/data.mdb" ] || {
		echo "reset.sh: $dir/db.template is missing (run apps/openldap/init.sh --config C --force)" >&2
		exit 1
	}
	cp -a "$dir/db.template" "$dir/db.new"
fi
rm -rf "$dir/db"
mv "$dir/db.new" "$dir/db"
