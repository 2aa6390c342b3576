#!/bin/sh
# app_reset_cmd for gerbera: puts back the database every replica started
# from (init.sh's gerbera.db.template) before a fresh gerbera starts.
#
#   reset.sh DATA_DIR
#
# gerbera keeps its state in <DATA_DIR>/gerbera.db (SQLite); a fresh
# server of a replica must start from the state the log starts from.
set -eu
dir=${1:?usage: reset.sh DATA_DIR}
[ -f "$dir/gerbera.db.template" ] || {
	echo "reset.sh: $dir/gerbera.db.template is missing (run apps/gerbera/init.sh --config C --force)" >&2
	exit 1
}
rm -f "$dir/gerbera.db.new" "$dir/gerbera.db-journal" "$dir/gerbera.db.backup"
cp "$dir/gerbera.db.template" "$dir/gerbera.db.new"
mv "$dir/gerbera.db.new" "$dir/gerbera.db"
