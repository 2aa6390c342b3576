#!/bin/sh
# app_reset_cmd for MariaDB: puts back the datadir every replica started
# from, before a fresh mariadbd starts on it.
#
#   reset.sh DATA_DIR
#
# mariadbd keeps its state on disk, but a fresh server of a replica must
# start from the state the log starts from: the datadir init.sh made (kept
# as <DATA_DIR>/db.template), then a recovery point (load.sh) and the log
# after it, or the whole log.  What the previous server left in
# <DATA_DIR>/db is older or newer than that: it goes.  apus runs this in
# every fresh start of the server (apus start, the guard's restarts, a
# deposed leader's re-execution), never for a CRIU restore.  Exits 0 once
# <DATA_DIR>/db is a copy of the template.
set -eu
dir=${1:?usage: reset.sh DATA_DIR}
[ -d "$dir/db.template" ] || {
	echo "reset.sh: $dir/db.template is missing (run apps/mariadb/init.sh --config C --force)" >&2
	exit 1
}
# Copied beside, then swapped in: a reset cut short leaves a template copy
# to finish or the old datadir, never half of one.
rm -rf "$dir/db.new"
cp -a "$dir/db.template" "$dir/db.new"
rm -rf "$dir/db"
mv "$dir/db.new" "$dir/db"
