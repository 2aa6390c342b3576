#!/usr/bin/env bats
# Basic replication: clients of the leader are served, clients of a backup
# are turned away, a bad config is refused before anything starts.

load helpers

setup_file() {
	file_cluster 17000
}

@test "status: node 0 leads view 0, the others are backups" {
	local j n role pid
	j=$(status_json)
	assert_eq "$(json_field "$(strip_nodes "$j")" view)" 0 "view"
	assert_eq "$(leader_id)" 0 "leader"
	for n in $(conf_nodes "$CONF"); do
		role=$(status_node "$j" "$n" role)
		if [ "$n" -eq 0 ]; then
			assert_eq "$role" leader "role of node 0"
		else
			assert_eq "$role" backup "role of node $n"
		fi
		assert_eq "$(status_node "$j" "$n" app_addr)" "$(node_host "$n"):$(app_port "$n")" "app_addr of node $n"
		pid=$(redis_pid "$n")
		[ -n "$pid" ] || fail "node $n: no pid in $(data_dir "$n")/apus.pid"
		kill -0 "$pid" || fail "node $n: redis pid $pid is not running"
		assert_eq "$(status_node "$j" "$n" pid)" "$pid" "pid of node $n in status"
	done
}

@test "SET and GET through the leader reach every replica" {
	local port
	port=$(leader_port)
	run redis-cli -h "$(leader_host)" -p "$port" SET greeting hello
	assert_eq "$status/$output" "0/OK" "SET"
	run redis-cli -h "$(leader_host)" -p "$port" GET greeting
	assert_eq "$status/$output" "0/hello" "GET"
	run redis-cli -h "$(leader_host)" -p "$port" INCRBY counter 41
	assert_eq "$status/$output" "0/41" "INCRBY"
	wait_equal_on_all "$CONF" hello GET greeting
	wait_equal_on_all "$CONF" 41 GET counter
	wait_digests_equal "$CONF" 30
}

@test "a client of a backup's app port is closed at once" {
	local n port count=0
	local bs
	bs=$(all_backups) || fail "not every other node is a backup"
	for n in $bs; do
		count=$((count + 1))
		port=$(app_port "$n")
		run timeout 5 redis-cli -h "$(node_host "$n")" -p "$port" PING
		[ "$status" -ne 124 ] || fail "node $n: connection to port $port hung instead of closing"
		[[ "$output" != *PONG* ]] || fail "node $n: backup answered a client on port $port: $output"
		# The refused client must change nothing on the backup.
		kill -0 "$(redis_pid "$n")" || fail "node $n: redis died after a refused client"
	done
	[ "$count" -ge 1 ] || fail "no backup in apus status"
	# ... and the leader still serves.
	run redis-cli -h "$(leader_host)" -p "$(leader_port)" PING
	assert_eq "$output" PONG "PING on the leader"
	wait_digests_equal "$CONF" 30
}

@test "a bad config is refused with its file and line" {
	local bad line
	bad="$(test_dir bad)/bad.conf"
	make_conf "$(dirname "$bad")" 17090 >/dev/null
	mv "$(dirname "$bad")/apus.conf" "$bad"
	sed -i '3i foo = bar' "$bad"
	line=$(grep -n '^foo = bar' "$bad" | cut -d: -f1)
	run "$APUS" start --config "$bad" 3>&-
	[ "$status" -ne 0 ] || fail "apus start accepted $bad"
	[ "${#lines[@]}" -eq 1 ] || fail "want one line, got: $output"
	[[ "$output" =~ ^apus:\ "$bad":$line:\ .*foo ]] || fail "want 'apus: $bad:$line: ... foo ...', got: $output"
}

@test "BGSAVE: the forked child passes through and the replicas stay equal" {
	local port n before after
	port=$(leader_port)
	redis-cli -h "$(leader_host)" -p "$port" SET saved-key v >/dev/null
	before=$(admin 0 LASTSAVE)
	sleep 1.1	# LASTSAVE has a resolution of one second
	# Through the app port: every replica runs BGSAVE (each forks a child
	# that must not act as a replica).
	run redis-cli -h "$(leader_host)" -p "$port" BGSAVE
	assert_eq "$status" 0 "BGSAVE exit"
	[[ "$output" == "Background saving started"* ]] || fail "BGSAVE said '$output'"
	for n in $(conf_nodes "$CONF"); do
		retry 50 0.2 bash -c "[ \"\$(redis-cli -s '$(admin_sock "$n")' LASTSAVE)\" -gt $before ]" ||
			fail "node $n: BGSAVE never finished"
		assert_eq "$(admin "$n" INFO persistence | tr -d '\r' | grep rdb_last_bgsave_status)" \
			"rdb_last_bgsave_status:ok" "node $n bgsave status"
		[ -s "$(data_dir "$n")/dump.rdb" ] || fail "node $n: no dump.rdb"
	done
	# Still serving, still replicating.
	run redis-cli -h "$(leader_host)" -p "$port" INCR after-save
	assert_eq "$status/$output" "0/1" "INCR after BGSAVE"
	wait_equal_on_all "$CONF" 1 GET after-save
	wait_digests_equal "$CONF" 30
}

@test "a restarted cluster comes back from the regions its previous run left behind" {
	local port n
	stop_cluster "$CONF"
	for n in $(conf_nodes "$CONF"); do
		[ -f "$(data_dir "$n")/apus.region" ] || fail "node $n left no region to be confused by"
	done
	# The leader first, alone for a while: the old backups' region files are
	# still there, and their owners are dead.
	"$APUS" start --config "$CONF" --node 0 >"$BATS_TEST_TMPDIR/start0" 2>&1 3>&- &
	sleep 1
	for n in $(conf_nodes "$CONF"); do
		[ "$n" -eq 0 ] && continue
		timeout 60 "$APUS" start --config "$CONF" --node "$n" 3>&- || fail "node $n did not start"
	done
	wait $! || fail "node 0 did not start: $(cat "$BATS_TEST_TMPDIR/start0")"
	# Every node came back from its log as a backup: they elect a leader.
	port=
	for ((n = 0; n < 100; n++)); do
		port=$(leader_port) && break
		sleep 0.1
	done
	[ -n "$port" ] || fail "no leader 10 s after the restart: $(status_json)"
	# A leader just elected executes its log before it serves (it refuses
	# clients meanwhile): a client tries again, as clients do.
	for ((n = 0; n < 50; n++)); do
		run timeout 10 redis-cli -h "$(leader_host)" -p "$port" SET after-restart yes
		[ "$output" = OK ] && break
		sleep 0.1
	done
	assert_eq "$status/$output" "0/OK" "SET after restart"
	wait_equal_on_all "$CONF" yes GET after-restart
}
