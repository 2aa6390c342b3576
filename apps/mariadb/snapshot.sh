#!/bin/sh
# snapshot_cmd for MariaDB: every database of the clients (all but mysql,
# information_schema, performance_schema and sys) dumped as SQL through the
# replica's admin socket (not replicated), to OUT.
#
#   snapshot.sh SOCK OUT
#
# apus runs it on a held backup (snapshot_leader = off): the backup
# executes no entry meanwhile, so the dump is the state at one log entry.
# The dump drops and creates each database, so that load.sh gives a server
# reset to the template (reset.sh) exactly that state.  Written to
# OUT.tmp, synced and renamed: OUT is always a whole dump.  Accounts and
# grants (the mysql schema) are not in it: users created through clients
# after init.sh are not kept by a recovery point (README.md).
set -eu
sock=${1:?usage: snapshot.sh SOCK OUT}
out=${2:?usage: snapshot.sh SOCK OUT}
sql() { timeout 30 mariadb --no-defaults -S "$sock" -u root -N -B -e "$1"; }
dbs=$(sql "SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT IN
	('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY schema_name")
rm -f "$out.tmp"
if [ -n "$dbs" ]; then
	# shellcheck disable=SC2086 # one word per database
	timeout 600 mariadb-dump --no-defaults -S "$sock" -u root --single-transaction \
		--add-drop-database --routines --triggers --events --databases $dbs >"$out.tmp"
else
	: >"$out.tmp"
fi
sync "$out.tmp"
mv "$out.tmp" "$out"
echo "snapshot.sh: $(echo $dbs | wc -w) database(s), $(wc -c <"$out") bytes"
