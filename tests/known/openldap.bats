#!/usr/bin/env bats
# shellcheck disable=SC2154 # status and output are set by bats' run.
# Debian's unmodified slapd (OpenLDAP 2.5: a listener thread and a worker
# pool over an MDB database) under apus: three replicas over shm on ports
# 20801-20803 (this file's range is 20800-20899), databases made identical
# by apps/openldap/init.sh, apps/openldap/workload.sh as the load, each
# replica's database read locally with slapcat (apps/openldap/digest.sh).
# apps/openldap/README.md says what works and what does not.
#
# tests/known/: tests of what users need that FAIL today, each naming the
# bug (not part of make test; `bats tests/known/`).  Here: a backup's
# replay hands slapd a connection's next request in the read that the
# leader's server found empty (EAGAIN), so slapd runs it on another worker
# thread, out of the log's order (apps/openldap/README.md, "Replicas
# diverge"); the first test passes, the other two fail.

load ../bats/helpers

LDAP_APP="$APUS_ROOT/apps/openldap"

have_slapd() {
	[ -x /usr/sbin/slapd ] && [ -x /usr/sbin/slapcat ] && [ -x /usr/sbin/slapadd ] &&
		command -v ldapmodify >/dev/null 2>&1 && command -v ldapsearch >/dev/null 2>&1
}

# ldap_conf DIR PORTBASE - apps/openldap/cluster-shm.conf with node i on
# PORTBASE+1+i, its data in DIR/n<i>, no guard (the tests kill servers on
# purpose) and no fsync.
ldap_conf() {
	local dir=$1 portbase=$2
	sed -e "s#/tmp/apus-openldap/node\([0-9]\)#$dir/n\1#" -e "s/^cluster .*/cluster = test$portbase/" \
		-e "s/= 740\([1-3]\)/= $((portbase / 10))\1/" -e "s/^guard .*/guard = off/" \
		-e "s/^fsync .*/fsync = none/" -e "s#{config_dir}#$LDAP_APP#g" \
		"$LDAP_APP/cluster-shm.conf" >"$dir/apus.conf"
	echo "$dir/apus.conf"
}

# kill_slapd_leftovers CONF - slapd processes of an aborted earlier run of
# this file (on its ports), and nothing else.
kill_slapd_leftovers() {
	local n port pid
	for n in $(conf_nodes "$1"); do
		port=$(conf_node_get "$1" "$n" app_port)
		for pid in $(ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
			[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slapd ] && kill -KILL "$pid" 2>/dev/null
		done
	done
	return 0
}

# ldap_serving [CONF] - the leader answers a search over its app port.
ldap_serving() {
	local port
	port=$(leader_port "${1:-$CONF}") || return 1
	timeout 5 ldapsearch -x -o nettimeout=2 -H "ldap://127.0.0.1:$port" -D cn=admin,dc=apus,dc=test \
		-w secret -LLL -s base -b dc=apus,dc=test dn >/dev/null 2>&1
}

# digests_settled - digest.sh's lines did not change over 2 s (the backups
# are done), in $DIGESTS; its exit status (equal or not) in $DIGEST_RC.
digests_settled() {
	local a b
	a=$("$LDAP_APP/digest.sh" --config "$CONF")
	sleep 2
	b=$("$LDAP_APP/digest.sh" --config "$CONF")
	DIGEST_RC=$?
	DIGESTS=$b
	[ "$a" = "$b" ]
}

setup_file() {
	have_slapd || return 0
	local dir
	dir=$(test_dir openldap)
	CONF=$(ldap_conf "$dir" 20800)
	export CONF
	kill_slapd_leftovers "$CONF"
	"$LDAP_APP/init.sh" --config "$CONF" --force >/dev/null
	start_cluster "$CONF"
	retry 100 0.2 ldap_serving "$CONF"
}

teardown_file() {
	[ -n "${CONF:-}" ] || return 0
	stop_cluster "$CONF"
	kill_slapd_leftovers "$CONF"
	"$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$CONF")"
}

setup() {
	have_slapd || skip "test requires slapd and ldap-utils (apt-get install slapd ldap-utils)"
}

@test "openldap: the initial databases are identical (raw slapcat) on every replica" {
	run "$LDAP_APP/digest.sh" --config "$CONF" --raw
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "openldap: 20 connections of adds, modifies, deletes and searches: slapcat digests equal on every replica" {
	local i
	run timeout 600 env CONNS=20 OPS=25 SEARCHERS=4 "$LDAP_APP/workload.sh" "$(leader_port)"
	echo "$output"
	[ "$status" -eq 0 ]
	for ((i = 0; i < 60; i++)); do
		digests_settled && break
	done
	echo "$DIGESTS"
	"$APUS" status --config "$CONF" 3>&- | head -n 6
	[ "$DIGEST_RC" -eq 0 ] && return 0
	"$LDAP_APP/digest.sh" --config "$CONF" --dump "$BATS_TEST_TMPDIR/dump" >/dev/null || true
	for i in 1 2; do
		echo "node 0 vs node $i, differing lines by attribute:"
		diff "$BATS_TEST_TMPDIR/dump/node0.ldif" "$BATS_TEST_TMPDIR/dump/node$i.ldif" |
			grep '^[<>]' | cut -d: -f1 | sort | uniq -c | sort -rn | head -n 8
	done
	grep -h 'request order given up\|differs from the leader' "$(data_dir 1)/apus.log" | head -n 3
	fail "the replicas' databases differ"
}

# Last: it leaves two replicas.  The new leader, which clients now use,
# and the other survivor must hold every acknowledged add and modify.
@test "openldap: a failover (kill -9 of the leader's slapd) keeps every acknowledged add and modify" {
	local log="$BATS_FILE_TMPDIR/audit.log" old new i writer after n
	old=$(leader_id)
	APUS_BIN="$APUS" "$LDAP_APP/audit.sh" write --config "$CONF" --log "$log" --count 150 &
	writer=$!
	for ((i = 0; i < 300; i++)); do
		[ -f "$log" ] && [ "$(grep -c '^ok mod' "$log")" -ge 50 ] && break
		sleep 0.1
	done
	kill -KILL "$(redis_pid "$old")"
	wait "$writer"
	new=$(leader_id)
	[ -n "$new" ] && [ "$new" != "$old" ] || fail "no new leader (old $old, now '$new')"
	echo "acknowledged $(grep -c '^ok add' "$log") adds and $(grep -c '^ok mod' "$log") modifies of 150; leader $old -> $new"
	# The writer followed the new leader.
	after=$(sed -n '/^fail/,$p' "$log" | grep -c '^ok mod' || true)
	if [ "$after" -lt 20 ]; then
		grep '^fail' "$log" | sed -n '1,3p;$p'
		"$APUS" status --config "$CONF" 3>&-
		show_logs "$CONF" 30
		fail "only $after modifies acknowledged after the failover"
	fi
	retry 60 0.5 "$LDAP_APP/audit.sh" check --config "$CONF" --log "$log" --node "$new"
	echo "$output"
	for n in $(conf_nodes "$CONF"); do
		[ "$n" != "$old" ] && [ "$n" != "$new" ] || continue
		if ! retry 20 0.5 "$LDAP_APP/audit.sh" check --config "$CONF" --log "$log" --node "$n"; then
			echo "$output"
			fail "backup $n lost acknowledged writes"
		fi
		echo "$output"
	done
}
