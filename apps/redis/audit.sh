#!/usr/bin/env bash
# A client that remembers what it was promised, for fault tests.
#
#   audit.sh write --host H --port P --log FILE [--count N] [--prefix P]
#   audit.sh write --config C --log FILE [--count N] [--prefix P]
#       N times (default 1000): SET <prefix>:<i> <i>, then INCR <prefix>:ctr;
#       logs "set <key>" / "incr" for every request that was acknowledged
#       (OK / an integer), "fail ..." for the others, and goes on.  With
#       --config the leader is found with `apus status` (APUS_BIN, default
#       build/bin/apus), and found again after every failed request: the
#       writer follows failovers.
#   audit.sh check --host H --port P --log FILE [--prefix P]
#       every acknowledged SET is present with its value, and the counter is
#       at least the number of acknowledged INCRs (an INCR whose answer was
#       lost may have happened) and at most the number attempted.  Prints
#       one line and exits 0 when clean, 1 with the missing keys otherwise.
#
# One redis-cli per request, with a 5 s timeout: slow (a few hundred
# requests a second) but every reply is seen by itself.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

cmd=${1:-}
[ $# -gt 0 ] && shift
host=127.0.0.1 port="" log="" count=1000 prefix=audit config=""
APUS_BIN=${APUS_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin/apus}
while [ $# -gt 0 ]; do
	case $1 in
	--host) host=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--config) config=$2; shift 2 ;;
	--log) log=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--prefix) prefix=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "audit.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
case $cmd in write | check) ;; -h | --help) usage; exit 0 ;; *) usage >&2; exit 2 ;; esac
# find_leader - set host and port from apus status (with --config); 1 if
# there is no leader right now.
find_leader() {
	local j id addr
	j=$("$APUS_BIN" status --config "$config" --json 2>/dev/null | tr -d ' \t\r\n') || return 1
	id=$(sed 's/{[^{}]*}//g' <<<"$j" | grep -o '"leader":[0-9]*' | cut -d: -f2)
	[ -n "$id" ] || return 1
	addr=$(grep -o "{\"id\":$id,[^{}]*}" <<<"$j" | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
	[ -n "$addr" ] || return 1
	host=${addr%:*} port=${addr##*:}
}

if [ -n "$config" ]; then
	for ((i = 0; i < 100; i++)); do find_leader && break; sleep 0.1; done
fi
[ -n "$port" ] && [ -n "$log" ] || { echo "audit.sh: --port (or --config) and --log are required" >&2; exit 2; }
[[ "$count" =~ ^[0-9]+$ ]] || { echo "audit.sh: --count must be a number" >&2; exit 2; }

cli() { timeout 5 redis-cli -h "$host" -p "$port" "$@" 2>&1; }

if [ "$cmd" = write ]; then
	for ((i = 1; i <= count; i++)); do
		r=$(cli SET "$prefix:$i" "$i")
		if [ "$r" = OK ]; then
			echo "set $prefix:$i"
		else
			echo "fail set $prefix:$i $r"
			[ -n "$config" ] && find_leader
		fi
		r=$(cli INCR "$prefix:ctr")
		if [[ "$r" =~ ^[0-9]+$ ]]; then
			echo "incr"
		else
			echo "fail incr $r"
			[ -n "$config" ] && find_leader
		fi
	done >>"$log"
	exit 0
fi

acked=$(grep -c '^set ' "$log" || true)
incrs=$(grep -c '^incr$' "$log" || true)
tried=$((incrs + $(grep -c '^fail incr' "$log" || true)))
missing=0
# One connection for all the GETs, in the log's order (a redis-cli per key
# took most of a check's time).
keys=$(grep '^set ' "$log" | cut -d' ' -f2)
if [ -n "$keys" ]; then
	values=$(printf 'GET %s\n' $keys | timeout 60 redis-cli -h "$host" -p "$port" 2>&1)
	while read -r key v; do
		if [ "$v" != "${key##*:}" ]; then
			echo "missing: $key (got '$v')"
			missing=$((missing + 1))
		fi
	done < <(paste -d' ' <(echo "$keys") <(echo "$values"))
fi
ctr=$(cli GET "$prefix:ctr")
[[ "$ctr" =~ ^[0-9]+$ ]] || ctr=0
if [ "$ctr" -lt "$incrs" ] || [ "$ctr" -gt "$tried" ]; then
	echo "counter $ctr outside [acknowledged $incrs, attempted $tried]"
	missing=$((missing + 1))
fi
echo "audit: $acked acknowledged SETs, $missing problem(s); counter $ctr (acknowledged $incrs, attempted $tried)"
[ "$missing" -eq 0 ]
