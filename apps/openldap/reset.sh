#!/bin/sh
# app_reset_cmd for OpenLDAP: puts back the database every replica started
# from, before a fresh slapd starts on it.
#
#   reset.sh DATA_DIR
#
# slapd keeps its state on disk (MDB, <DATA_DIR>/db/data.mdb), but a fresh
# server of a replica must start from the state the log starts from: the
# database init.sh made (kept as <DATA_DIR>/db.template), then the log.
# What the previous slapd left in <DATA_DIR>/db is newer than that: it
# goes.  apus runs this in every fresh start of the server (apus start, the
# guard's restarts, a deposed leader's re-execution).  Exits 0 once
# <DATA_DIR>/db is a copy of the template.
set -eu
dir=${1:?usage: reset.sh DATA_DIR}
[ -f "$dir/db.template/data.mdb" ] || {
	echo "reset.sh: $dir/db.template is missing (run apps/openldap/init.sh --config C --force)" >&2
	exit 1
}
# Copied beside, then swapped in: a reset cut short leaves a template copy
# to finish or the old database, never half of one.
rm -rf "$dir/db.new"
cp -a "$dir/db.template" "$dir/db.new"
rm -rf "$dir/db"
mv "$dir/db.new" "$dir/db"
