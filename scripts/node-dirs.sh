# shellcheck shell=bash
# Sourced by the apps' scripts (apps/mariadb, apps/openldap, apps/clamav).
#
# node_values CONFIG KEY: one line "<id> <value>" per [node N] section of
# CONFIG that sets KEY.
node_values() {
	awk -v key="$2" '
	/^[[:space:]]*\[node[[:space:]]+[0-9]+[[:space:]]*\]/ { s = $0; gsub(/[^0-9]/, "", s); id = s; next }
	/^[[:space:]]*\[/ { id = ""; next }
	id != "" {
		line = $0; sub(/#.*/, "", line)
		if (match(line, "^[[:space:]]*" key "[[:space:]]*=")) {
			v = substr(line, RLENGTH + 1); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v)
			print id, v
		}
	}' "$1"
}

# global_value CONFIG KEY: KEY's value before the first section of CONFIG
# (the default of every node), or nothing.
global_value() {
	awk -v key="$2" '
	/^[[:space:]]*\[/ { exit }
	{
		line = $0; sub(/#.*/, "", line)
		if (match(line, "^[[:space:]]*" key "[[:space:]]*=")) {
			v = substr(line, RLENGTH + 1); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v)
			print v
		}
	}' "$1" | tail -n 1
}

# node_dirs CONFIG: one line "<id> <data_dir>" per [node N] section of
# CONFIG, relative data_dirs taken from the config's folder (as apus does).
node_dirs() {
	local confdir id dir
	confdir=$(cd "$(dirname "$1")" && pwd) || return 1
	node_values "$1" data_dir | while read -r id dir; do
		case $dir in
		/*) echo "$id $dir" ;;
		*) echo "$id $confdir/$dir" ;;
		esac
	done
}
