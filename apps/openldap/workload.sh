#!/usr/bin/env bash
# A mixed LDAP load from many concurrent connections.
#
#   workload.sh PORT [HOST]
#
# CONNS (default 20) writers at once, each ONE connection (an ldapmodify
# bound as cn=admin,dc=apus,dc=test) that runs OPS (default 25) rounds of:
# add uid=w<c>-<j>,ou=people; modify it (add mail, replace
# telephoneNumber); replace description of the shared entry
# cn=counter,dc=apus,dc=test and add a value "w<c>-<j>" to its
# multi-valued l (racing writes: which one wins, and the order of l's
# values, is the order the server executed them in); every 5th round
# delete the entry of round j-3.  Meanwhile SEARCHERS (default 4) clients
# run ldapsearch in a loop (a connection each) until the writers are done.
# Prefix PREFIX (default w) names the entries, so that runs can be
# repeated.  Exits 0 when every writer's ldapmodify succeeded.
set -uo pipefail
port=${1:?usage: workload.sh PORT [HOST]}
host=${2:-127.0.0.1}
conns=${CONNS:-20} ops=${OPS:-25} searchers=${SEARCHERS:-4} prefix=${PREFIX:-w}
url="ldap://$host:$port"
bind=(-x -D "cn=admin,dc=apus,dc=test" -w secret -H "$url")

ldif() { # ldif CONN
	local c=$1 j
	for ((j = 1; j <= ops; j++)); do
		cat <<LDIF
dn: uid=$prefix$c-$j,ou=people,dc=apus,dc=test
changetype: add
objectClass: inetOrgPerson
uid: $prefix$c-$j
cn: writer $c round $j
sn: $prefix$c

dn: uid=$prefix$c-$j,ou=people,dc=apus,dc=test
changetype: modify
add: mail
mail: $prefix$c-$j@apus.test
-
replace: telephoneNumber
telephoneNumber: +1 555 $c $j

dn: cn=counter,dc=apus,dc=test
changetype: modify
replace: description
description: $prefix$c-$j
-
add: l
l: $prefix$c-$j

LDIF
		if ((j % 5 == 0)); then
			printf 'dn: uid=%s%d-%d,ou=people,dc=apus,dc=test\nchangetype: delete\n\n' "$prefix" "$c" $((j - 3))
		fi
	done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pids=()
for ((c = 1; c <= conns; c++)); do
	ldif "$c" >"$tmp/$c.ldif"
done
for ((c = 1; c <= conns; c++)); do
	timeout 600 ldapmodify "${bind[@]}" -f "$tmp/$c.ldif" >"$tmp/$c.out" 2>&1 &
	pids+=($!)
done
touch "$tmp/running"
for ((s = 1; s <= searchers; s++)); do
	(
		n=0
		while [ -e "$tmp/running" ]; do
			timeout 30 ldapsearch "${bind[@]}" -LLL -b ou=people,dc=apus,dc=test "(sn=$prefix$(( (n % conns) + 1 )))" mail >/dev/null 2>&1
			timeout 30 ldapsearch "${bind[@]}" -LLL -b cn=counter,dc=apus,dc=test -s base description >/dev/null 2>&1
			n=$((n + 1))
		done
		echo "$n" >"$tmp/search.$s"
	) &
done
failed=0
for ((c = 1; c <= conns; c++)); do
	if ! wait "${pids[$((c - 1))]}"; then
		failed=$((failed + 1))
		echo "workload.sh: writer $c failed: $(tail -n 3 "$tmp/$c.out" | tr '\n' ' ')" >&2
	fi
done
rm -f "$tmp/running"
wait
searches=$(cat "$tmp"/search.* 2>/dev/null | awk '{ s += $1 } END { print s * 2 + 0 }')
echo "workload.sh: $conns writers x $ops rounds ($((conns * (ops * 3 + ops / 5))) writes), $failed failed; $searches searches"
[ "$failed" -eq 0 ]
