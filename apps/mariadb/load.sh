#!/bin/sh
# snapshot_load_cmd for MariaDB: puts a snapshot.sh dump into a fresh
# replica's server through its admin socket (not replicated).
#
#   load.sh SOCK IN
#
# apus runs it when a node starts from a recovery point, once its server
# listens (reset.sh gave it the template's datadir) and before the node
# executes any entry after that point.  The dump drops and creates each of
# its databases, so a second run after a failed one gives the same state.
# Waits up to 60 s for the server to answer; exits non-zero if it does not
# or if a statement fails.
set -eu
sock=${1:?usage: load.sh SOCK IN}
in=${2:?usage: load.sh SOCK IN}
i=0
until timeout 10 mariadb --no-defaults -S "$sock" -u root -e 'SELECT 1' >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 600 ] || { echo "load.sh: the server on $sock does not answer" >&2; exit 1; }
	sleep 0.1
done
timeout 600 mariadb --no-defaults -S "$sock" -u root <"$in"
echo "load.sh: $(wc -c <"$in") bytes loaded"
