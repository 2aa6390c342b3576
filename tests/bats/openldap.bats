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
# coordinator/node/turns.h): slapd's listener reads until EAGAIN and hands a
# second request of one read to another worker thread, out of the log's
# order and outside its input window (apps/openldap/README.md).

load helpers

load openldap

# The as-shipped test runs a cluster of its own (and its guards, which
# would bring it back): stopped here whatever the test did.
teardown() {
	local c
	c=$(cat "$BATS_FILE_TMPDIR/shipped.conf.path" 2>/dev/null) && [ -f "$c" ] || return 0
	stop_cluster "$c"
	kill_slapd_leftovers "$c"
	"$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$c")"
}

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

# ldap_shipped_conf DIR PORTBASE - apps/openldap/cluster-shm.conf as
# shipped (guard on, recovery points) but for the ports, the data
# directories and the log: 256 KB with entries of at most 8 KB, so that a
# few hundred LDAP operations wrap it.  With APUS_TEST_NETNS:
# apps/openldap/cluster-tcp.conf, its ports as shipped, in the tests'
# namespaces.
ldap_shipped_conf() {
	local dir=$1 portbase=$2
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		shipped_tcp_conf openldap "$dir" -e "s/^cluster .*/cluster = test$portbase/" \
			-e "s/^log_size .*/log_size = 256K\nmax_entry = 8K/"
		return
	fi
	sed -e "s#/tmp/apus-openldap/node\([0-9]\)#$dir/n\1#" -e "s/^cluster .*/cluster = test$portbase/" \
		-e "s/= 740\([1-3]\)/= $((portbase / 10))\1/" -e "s/^log_size .*/log_size = 256K\nmax_entry = 8K/" \
		-e "s#{config_dir}#$LDAP_APP#g" "$LDAP_APP/cluster-shm.conf" >"$dir/apus.conf"
	echo "$dir/apus.conf"
}

# same_user_entries - every node's slapcat equal but for the operational
# attributes that tests/known/openldap.bats shows differ.
same_user_entries() {
	local d="$BATS_TEST_TMPDIR/dump" n first=""
	"$LDAP_APP/digest.sh" --config "$CONF" --dump "$d" >/dev/null || true
	for n in $(conf_nodes "$CONF"); do
		grep -vE '^(entryCSN|entryUUID|createTimestamp|modifyTimestamp):' "$d/node$n.ldif" >"$d/user$n.ldif" ||
			return 1
		[ -n "$first" ] || first=$n
		cmp -s "$d/user$first.ldif" "$d/user$n.ldif" || {
			diff "$d/user$first.ldif" "$d/user$n.ldif" | head -n 6
			return 1
		}
	done
	[ "$(grep -c '^dn:' "$d/user$first.ldif")" -gt 50 ]
}

# audit_all ROUNDS - audit.sh check of every writer's log (prefixes
# r<round>w1..w4, rounds 1..ROUNDS) on every node.
audit_all() {
	local p r
	for ((r = 1; r <= $1; r++)); do
		for p in w1 w2 w3 w4; do
			"$LDAP_APP/audit.sh" check --config "$CONF" --log "$BATS_TEST_TMPDIR/r$r$p.log" \
				--prefix "r$r$p" --all || return 1
		done
	done
}

# write_round R - four audited writers (prefixes r<R>w1..w4), 30 adds and
# modifies each, a connection per operation; at least half acknowledged.
write_round() {
	local p
	for p in w1 w2 w3 w4; do
		APUS_BIN="$APUS" "$LDAP_APP/audit.sh" write --config "$CONF" --log "$BATS_TEST_TMPDIR/r$1$p.log" \
			--count 30 --prefix "r$1$p" &
	done
	wait
	cat "$BATS_TEST_TMPDIR"/r"$1"w?.log | cut -d' ' -f1-2 | sort | uniq -c
	[ "$(cat "$BATS_TEST_TMPDIR"/r"$1"w?.log | grep -c '^ok mod')" -ge 60 ] ||
		fail "round $1: fewer than 60 of 120 modifies acknowledged"
}

# Last, with a cluster of its own (the shared one is stopped).  Twice:
# four audited writers (a connection per operation, so that points find
# entries with no client connected: snapshot_connections = none) wrap the
# 256 KB log, then kill -9 of all: every node comes back from its recovery
# point (snapshot.sh's slapcat, loaded by reset.sh's slapadd), not from
# the log's first entry, and holds every add and modify acknowledged in
# every round so far.
@test "openldap as shipped (guard on, recovery points, a log that wraps): kill -9 of all, then apus start, twice: every acknowledged add and modify on every replica" {
	local j n r
	stop_cluster "$CONF"
	kill_slapd_leftovers "$CONF"
	CONF=$(ldap_shipped_conf "$(test_dir shipped20820)" 20820)
	echo "$CONF" >"$BATS_FILE_TMPDIR/shipped.conf.path"
	kill_slapd_leftovers "$CONF"
	"$LDAP_APP/init.sh" --config "$CONF" --force >/dev/null
	start_cluster "$CONF"
	retry 100 0.2 ldap_serving || fail "no leader serves"
	for r in 1 2; do
		local pos0
		pos0=$(status_node "$(status_json)" "$(leader_id)" log_pos)
		write_round "$r"
		j=$(status_json)
		[ "$(status_node "$j" "$(leader_id)" log_pos)" -gt $((pos0 + (256 << 10))) ] ||
			fail "round $r: the log did not wrap: $j"
		for n in $(backups); do
			retry 100 0.2 eval '[ "$(status_node "$(status_json)" '"$n"' recovery_point)" = snapshot ]' ||
				fail "round $r: backup $n has no recovery point: $(status_json)"
		done
		kill_servers_and_guards
		start_cluster "$CONF"
		retry 150 0.2 ldap_serving || fail "round $r: no leader serves after the restart"
		grep -h 'starting from the recovery point' "$(data_dir 0)/apus.log" "$(data_dir 1)/apus.log" \
			"$(data_dir 2)/apus.log" | tail -n 1 | grep . || fail "round $r: no node started from a recovery point"
		run retry 60 0.5 audit_all "$r"
		echo "$output" | tail -n 3
		[ "$status" -eq 0 ] || fail "round $r: acknowledged writes missing after the restart"
		# Every replica holds the same entries with the same values.  Not
		# compared: the operational attributes of an operation slapd defers
		# behind its bind, which differ with a connection per operation
		# (tests/known/openldap.bats).
		retry 60 0.5 same_user_entries || fail "round $r: the replicas' entries differ: $output"
	done
}
