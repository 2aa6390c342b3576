#!/usr/bin/env bats
# shellcheck disable=SC2154 # status and output are set by bats' run.
# Debian's unmodified slapd (OpenLDAP 2.5: a listener thread and a worker
# pool over an MDB database) under apus: three replicas over shm on ports
# 20801-20803 (this file's range is 20800-20899), databases made identical
# by apps/openldap/init.sh, apps/openldap/workload.sh as the load, each
# replica's database read locally with slapcat (apps/openldap/digest.sh).
# apps/openldap/README.md says what works and what does not.
#
# A backup's slapd gets a connection's next request only once it has
# answered the one before, as the leader's did (ENTRY_F_ANSWERED,
# coordinator/turns.h): slapd's listener reads until EAGAIN and hands a
# second request of one read to another worker thread, out of the log's
# order and outside its input window (apps/openldap/README.md).

load helpers

load openldap

@test "openldap: the initial databases are identical (raw slapcat) on every replica" {
	run "$LDAP_APP/digest.sh" --config "$CONF" --raw
	echo "$output"
	[ "$status" -eq 0 ]
}

# Byte for byte: entryUUIDs too (their clock fields come from the request's
# window, their node and clock-sequence fields from /dev/urandom read at
# start, the same boot stream on every replica).
@test "openldap: 20 connections of adds, modifies, deletes and searches: raw slapcat equal on every replica" {
	local i
	run timeout 600 env CONNS=20 OPS=25 SEARCHERS=4 "$LDAP_APP/workload.sh" "$(leader_port)"
	echo "$output"
	[ "$status" -eq 0 ]
	for ((i = 0; i < 60; i++)); do
		digests_settled && break
	done
	echo "$DIGESTS"
	"$APUS" status --config "$CONF" 3>&- | head -n 6
	if [ "$DIGEST_RC" -eq 0 ]; then
		run "$LDAP_APP/digest.sh" --config "$CONF" --raw
		echo "$output"
		[ "$status" -eq 0 ] && return 0
	fi
	show_ldif_diffs
	fail "the replicas' databases differ"
}

# A replica that replays the whole log (apus start --node of a stopped
# backup: reset to the template, every entry from the first) ends with
# every acknowledged add and modify: it lost 6 of 30 adds and 13 of 30
# modifies when its slapd got each connection's requests at once.  (Its
# operational attributes may still differ: tests/known/openldap.bats.)
@test "openldap: a backup stopped and started replays the log: every acknowledged add and modify" {
	local log="$BATS_TEST_TMPDIR/audit.log" b
	b=$(all_backups | head -n 1)
	audit_then_restart "$log" "$b"
	retry 60 0.5 "$LDAP_APP/audit.sh" check --config "$CONF" --log "$log" --node "$b" ||
		fail "node $b lost acknowledged writes: $output"
	echo "$output"
}

# Last: it leaves two replicas.  The new leader, which clients now use,
# and the other survivor must hold every acknowledged add and modify.
@test "openldap: a failover (kill -9 of the leader's slapd) keeps every acknowledged add and modify" {
	local log="$BATS_FILE_TMPDIR/audit.log" old new after n
	APUS_BIN="$APUS" "$LDAP_APP/audit.sh" write --config "$CONF" --log "$log" --count 150 &
	kill_leader_under $! "$log" '^ok mod' 50 300
	old=$OLD new=$NEW
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
