#!/usr/bin/env bash
# An LDAP client that remembers what it was promised, for failover tests.
#
#   audit.sh write --config C --log FILE [--count N] [--prefix P]
#       N times (default 300), through the leader (found with `apus
#       status`; APUS_BIN, default build/bin/apus), one connection each:
#       ldapadd uid=<P><i>,ou=people,dc=apus,dc=test (P default "a"), then
#       ldapmodify of it (replace description: v<i>).  Logs "ok add <i>"
#       and "ok mod <i>" for each operation whose result was success,
#       "fail add|mod <i> ..." for the others (a failed add skips its
#       modify); after a failure it backs off (0.1 s more per failure in a
#       row, up to 1 s), finds the leader again and goes on.  An add that
#       fails with "Already exists" (the leader died after executing it,
#       before the reply) counts as attempted, not acknowledged.
#   audit.sh check --config C --log FILE [--prefix P] [--all] [--node N]
#       On every replica whose slapd is running (--all: every node; --node:
#       node N only), read
#       locally with slapcat: every acknowledged add is there, every
#       acknowledged modify's value is, and no <P><i> is there that was
#       never attempted.  One line per node; exits 0 when clean on every
#       node read (and at least one was), 1 otherwise.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
cmd=${1:-}
[ $# -gt 0 ] && shift
config="" log="" count=300 prefix=a all=0 only=""
APUS_BIN=${APUS_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin/apus}
while [ $# -gt 0 ]; do
	case $1 in
	--config) config=$2; shift 2 ;;
	--log) log=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--prefix) prefix=$2; shift 2 ;;
	--all) all=1; shift ;;
	--node) only=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "audit.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
case $cmd in write | check) ;; -h | --help) usage; exit 0 ;; *) usage >&2; exit 2 ;; esac
[ -n "$config" ] && [ -f "$config" ] && [ -n "$log" ] ||
	{ echo "audit.sh: --config FILE and --log FILE are required" >&2; exit 2; }
[[ "$count" =~ ^[0-9]+$ ]] || { echo "audit.sh: --count must be a number" >&2; exit 2; }
[[ "$prefix" =~ ^[a-z][a-z0-9]*$ ]] || { echo "audit.sh: bad prefix" >&2; exit 2; }
PATH=$PATH:/usr/sbin

host="" port=""
# find_leader - host and port of the serving leader per apus status.
find_leader() {
	local j id addr
	j=$("$APUS_BIN" status --config "$config" --json 2>/dev/null | tr -d ' \t\r\n') || return 1
	id=$(sed 's/{[^{}]*}//g' <<<"$j" | grep -o '"leader":[0-9]*' | cut -d: -f2)
	[ -n "$id" ] || return 1
	addr=$(grep -o "{\"id\":$id,[^{}]*}" <<<"$j" | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
	[ -n "$addr" ] || return 1
	host=${addr%:*} port=${addr##*:}
}
ldap() { # ldap LDIF
	timeout 10 ldapmodify -x -o nettimeout=5 -H "ldap://$host:$port" -D cn=admin,dc=apus,dc=test \
		-w secret <<<"$1" 2>&1
}

if [ "$cmd" = write ]; then
	for ((i = 0; i < 100; i++)); do find_leader && break; sleep 0.1; done
	[ -n "$port" ] || { echo "audit.sh: no leader" >&2; exit 1; }
	fails=0
	for ((i = 1; i <= count; i++)); do
		dn="uid=$prefix$i,ou=people,dc=apus,dc=test"
		ok=0
		if out=$(ldap "dn: $dn
changetype: add
objectClass: inetOrgPerson
uid: $prefix$i
cn: audit $i
sn: audit"); then
			echo "ok add $i"
			if out=$(ldap "dn: $dn
changetype: modify
replace: description
description: v$i"); then
				echo "ok mod $i"
				ok=1
			else
				echo "fail mod $i $(tr '\n' ' ' <<<"$out")"
			fi
		else
			echo "fail add $i $(tr '\n' ' ' <<<"$out")"
		fi
		if [ "$ok" -eq 1 ]; then
			fails=0
		else
			# A new leader refuses clients until it executed what the old
			# one logged: back off, 0.1 s more per failure in a row up to 1 s.
			fails=$((fails < 10 ? fails + 1 : 10))
			sleep "$((fails / 10)).$((fails % 10))"
			for ((k = 0; k < 50; k++)); do find_leader && break; sleep 0.1; done
		fi
	done >>"$log"
	exit 0
fi

# shellcheck source=scripts/node-dirs.sh
. "$(dirname "$0")/../../scripts/node-dirs.sh"
mapfile -t nodes < <(node_dirs "$config")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep '^ok add ' "$log" | cut -d' ' -f3 | sort -u >"$tmp/adds"
grep '^ok mod ' "$log" | sed 's/^ok mod \(.*\)/\1 v\1/' | sort -u >"$tmp/mods"
grep -E '^(ok|fail) add ' "$log" | cut -d' ' -f3 | sort -u >"$tmp/tried"
answered=0 bad=0
for nd in "${nodes[@]}"; do
	read -r id d <<<"$nd"
	[ -z "$only" ] || [ "$id" = "$only" ] || continue
	if [ "$all" -eq 0 ] && ! kill -0 "$(cat "$d/apus.pid" 2>/dev/null)" 2>/dev/null; then
		echo "node $id: not running (skipped)"
		continue
	fi
	if ! timeout 60 slapcat -f "$d/slapd.conf" -o ldif-wrap=no -a "(uid=$prefix*)" >"$tmp/ldif" 2>/dev/null; then
		echo "node $id: slapcat failed"
		bad=1
		continue
	fi
	answered=$((answered + 1))
	# "<i> <description>" per audit entry (description empty: none).
	awk -v p="$prefix" '
		/^dn: / { if (u != "") print u, dsc; u = ""; dsc = "" }
		$1 == "uid:" && index($2, p) == 1 { u = substr($2, length(p) + 1) }
		$1 == "description:" { dsc = $2 }
		END { if (u != "") print u, dsc }' "$tmp/ldif" | sort -u >"$tmp/have"
	cut -d' ' -f1 "$tmp/have" | sort -u >"$tmp/have_ids"
	madd=$(comm -23 "$tmp/adds" "$tmp/have_ids" | wc -l)
	mmod=$(comm -23 "$tmp/mods" <(awk 'NF == 2' "$tmp/have" | sort -u) | wc -l)
	extra=$(comm -13 "$tmp/tried" "$tmp/have_ids" | wc -l)
	echo "node $id: $(wc -l <"$tmp/have_ids") entries; $(wc -l <"$tmp/adds") adds acknowledged ($madd missing), $(wc -l <"$tmp/mods") modifies acknowledged ($mmod missing), $extra never attempted"
	[ "$madd" -eq 0 ] && [ "$mmod" -eq 0 ] && [ "$extra" -eq 0 ] || bad=1
done
[ "$answered" -gt 0 ] && [ "$bad" -eq 0 ]
