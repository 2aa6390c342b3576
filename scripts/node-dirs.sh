# shellcheck shell=bash
# Sourced by the apps' scripts (apps/mariadb, apps/openldap).  node_dirs CONFIG: one line
# "<id> <data_dir>" per [node N] section of CONFIG, relative data_dirs
# taken from the config's folder (as apus does).
node_dirs() {
	local confdir
	confdir=$(cd "$(dirname "$1")" && pwd) || return 1
	awk -v confdir="$confdir" '
	/^[[:space:]]*\[node[[:space:]]+[0-9]+[[:space:]]*\]/ { s = $0; gsub(/[^0-9]/, "", s); id = s; next }
	/^[[:space:]]*\[/ { id = ""; next }
	id != "" {
		line = $0; sub(/#.*/, "", line)
		if (match(line, /^[[:space:]]*data_dir[[:space:]]*=/)) {
			v = substr(line, RLENGTH + 1); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v)
			if (v !~ /^\//) v = confdir "/" v
			print id, v
		}
	}' "$1"
}
