#!/usr/bin/env bash
# Give every node of a MariaDB cluster config the same initial datadir.
#
#   init.sh --config C [--force]
#
# Builds one template datadir with mariadb-install-db, starts it once
# (unix socket only, no networking) to create the database sbtest and the
# user 'sbtest'@'%' with an EMPTY password (the MySQL handshake carries a
# random scramble, different on every replica: only an empty password
# authenticates the same way whatever the scramble), stops it, and copies
# it to <data_dir>/db of every [node N] of C, and to <data_dir>/db.template,
# which reset.sh (app_reset_cmd) puts back in every fresh start of the
# server.  Replicas must start from byte-identical state: the log replays
# only what clients sent.
#
# Refuses (exit 1) when a node's <data_dir>/db exists, unless --force,
# which wipes each node's data_dir first (its apus files included: the log
# of an old cluster must not be replayed onto a fresh database).
set -euo pipefail

usage() { sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
config="" force=0
while [ $# -gt 0 ]; do
	case $1 in
	--config) config=$2; shift 2 ;;
	--force) force=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "init.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
[ -n "$config" ] && [ -f "$config" ] || { echo "init.sh: --config FILE is required" >&2; exit 2; }
for c in mariadbd mariadb-install-db mariadb mariadb-admin; do
	command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] ||
		{ echo "init.sh: $c not found (apt-get install mariadb-server mariadb-client)" >&2; exit 1; }
done
PATH=$PATH:/usr/sbin

# The data_dir of every [node N] section, relative ones from the config's folder.
# shellcheck source=scripts/node-dirs.sh
. "$(dirname "$0")/../../scripts/node-dirs.sh"
mapfile -t dirs < <(node_dirs "$config" | cut -d' ' -f2-)
[ "${#dirs[@]}" -gt 0 ] || { echo "init.sh: no [node N] with a data_dir in $config" >&2; exit 1; }
for i in "${!dirs[@]}"; do
	if [ -e "${dirs[$i]}/db" ] && [ "$force" -eq 0 ]; then
		echo "init.sh: ${dirs[$i]}/db exists (--force wipes every node's data_dir)" >&2
		exit 1
	fi
done

tmpl=$(mktemp -d /tmp/apus-mariadb-template.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmpl"
}
trap cleanup EXIT

mariadb-install-db --no-defaults --datadir="$tmpl/db" --user=root \
	--auth-root-authentication-method=normal --skip-test-db >"$tmpl/install.log" 2>&1 ||
	{ cat "$tmpl/install.log" >&2; echo "init.sh: mariadb-install-db failed" >&2; exit 1; }
mariadbd --no-defaults --datadir="$tmpl/db" --socket="$tmpl/mysqld.sock" --skip-networking \
	--user=root --log-error="$tmpl/err.log" --pid-file="$tmpl/mysqld.pid" &
pid=$!
for ((i = 0; i < 300; i++)); do
	mariadb-admin --no-defaults -S "$tmpl/mysqld.sock" -u root ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmpl/err.log" >&2; echo "init.sh: mariadbd died" >&2; exit 1; }
	sleep 0.1
done
mariadb --no-defaults -S "$tmpl/mysqld.sock" -u root <<'SQL'
CREATE DATABASE sbtest;
CREATE USER 'sbtest'@'%' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON sbtest.* TO 'sbtest'@'%';
CREATE USER 'sbtest'@'localhost' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON sbtest.* TO 'sbtest'@'localhost';
FLUSH PRIVILEGES;
SQL
mariadb-admin --no-defaults -S "$tmpl/mysqld.sock" -u root shutdown
wait "$pid" || true
pid=""
# What a shut-down server leaves that must not travel.
rm -f "$tmpl/db/"*.pid "$tmpl/db/"*.err

for d in "${dirs[@]}"; do
	if [ "$force" -eq 1 ] && [ -d "$d" ]; then
		# An old cluster's region memory files go with their data_dir.
		"$(dirname "$0")/../../scripts/drop-regions.sh" "$d" >/dev/null 2>&1 || true
		rm -rf "$d"
	fi
	mkdir -p "$d"
	chmod 700 "$d"
	cp -a "$tmpl/db" "$d/db"
	# What reset.sh (app_reset_cmd) puts back in every fresh start.
	cp -a "$tmpl/db" "$d/db.template"
	echo "init.sh: $d/db ready"
done
