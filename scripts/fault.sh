#!/usr/bin/env bash
# Faults for one replica of a running cluster, for tests and drills.
#
#   scripts/fault.sh kill      --config C --node N   SIGKILL its server (kill -9)
#   scripts/fault.sh pause     --config C --node N   SIGSTOP it
#   scripts/fault.sh resume    --config C --node N   SIGCONT it
#   scripts/fault.sh partition --config C --node N   cut its network link (its netns)
#   scripts/fault.sh heal      --config C --node N   restore the link
#   scripts/fault.sh restart   --config C --node N   apus start --node N again
#
# The server's pid comes from <data_dir>/apus.pid; partition/heal need the
# node to run in a network namespace (netns = ... in the config, see
# scripts/netns.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { echo "fault.sh: $*" >&2; exit 1; }

cmd=${1:-}
[ $# -gt 0 ] && shift
conf="${APUS_CONFIG:-}" node=""
while [ $# -gt 0 ]; do
	case $1 in
	-c | --config) conf=$2; shift 2 ;;
	-n | --node) node=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown argument '$1'" ;;
	esac
done
case $cmd in kill | pause | resume | partition | heal | restart) ;; -h | --help | help) usage; exit 0 ;; *) usage >&2; exit 2 ;; esac
[ -r "$conf" ] || die "cannot read config '$conf' (--config)"
[[ "$node" =~ ^[0-9]+$ ]] || die "--node N is required"

# node_get KEY - KEY of [node N] in the config.
node_get() {
	awk -v node="$node" -v key="$1" '
		/^[[:space:]]*\[/ { s = $0; gsub(/[][[:space:]]/, " ", s); split(s, f, " "); in_node = (f[1] == "node" && f[2] == node); next }
		in_node { line = $0; sub(/#.*/, "", line); eq = index(line, "="); if (!eq) next
			  k = substr(line, 1, eq - 1); v = substr(line, eq + 1)
			  gsub(/^[[:space:]]+|[[:space:]]+$/, "", k); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v)
			  if (k == key) { print v; exit } }' "$conf"
}

pid() {
	local d p
	d=$(node_get data_dir)
	[ -n "$d" ] || die "node $node has no data_dir in $conf"
	case $d in /*) ;; *) d="$(dirname "$conf")/$d" ;; esac
	p=$(cat "$d/apus.pid" 2>/dev/null) || die "node $node has no pid file ($d/apus.pid)"
	kill -0 "$p" 2>/dev/null || die "node $node (pid $p) is not running"
	echo "$p"
}

case $cmd in
kill) kill -KILL "$(pid)" ;;
pause) kill -STOP "$(pid)" ;;
resume) kill -CONT "$(pid)" ;;
partition | heal)
	ns=$(node_get netns)
	[ -n "$ns" ] || die "node $node runs in no network namespace (netns = ... in $conf)"
	bash "$root/scripts/netns.sh" "$cmd" "$ns"
	;;
restart) "${APUS_BIN:-$root/build/bin/apus}" start --config "$conf" --node "$node" ;;
esac
