#!/usr/bin/env bats
# Basic replication: clients of the leader are served, clients of a backup
# are turned away, a bad config is refused before anything starts.

load helpers

setup_file() {
	have redis || return 0
	CONF=$(make_conf "$(test_dir cluster)" 17000)
	export CONF
	start_cluster "$CONF"
}

teardown_file() {
	stop_cluster "${CONF:-}"
}

setup() {
	requires redis
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
		assert_eq "$(status_node "$j" "$n" app_addr)" "127.0.0.1:$(app_port "$n")" "app_addr of node $n"
		pid=$(redis_pid "$n")
		[ -n "$pid" ] || fail "node $n: no pid in $(data_dir "$n")/apus.pid"
		kill -0 "$pid" || fail "node $n: redis pid $pid is not running"
		assert_eq "$(status_node "$j" "$n" pid)" "$pid" "pid of node $n in status"
	done
}

@test "SET and GET through the leader reach every replica" {
	local port
	port=$(leader_port)
	run redis-cli -h 127.0.0.1 -p "$port" SET greeting hello
	assert_eq "$status/$output" "0/OK" "SET"
	run redis-cli -h 127.0.0.1 -p "$port" GET greeting
	assert_eq "$status/$output" "0/hello" "GET"
	run redis-cli -h 127.0.0.1 -p "$port" INCRBY counter 41
	assert_eq "$status/$output" "0/41" "INCRBY"
	wait_equal_on_all "$CONF" hello GET greeting
	wait_equal_on_all "$CONF" 41 GET counter
	wait_digests_equal "$CONF" 30
}

@test "a client of a backup's app port is closed at once" {
	local n port count=0
	for n in $(backups); do
		count=$((count + 1))
		port=$(app_port "$n")
		run timeout 5 redis-cli -h 127.0.0.1 -p "$port" PING
		[ "$status" -ne 124 ] || fail "node $n: connection to port $port hung instead of closing"
		[[ "$output" != *PONG* ]] || fail "node $n: backup answered a client on port $port: $output"
		# The refused client must change nothing on the backup.
		kill -0 "$(redis_pid "$n")" || fail "node $n: redis died after a refused client"
	done
	[ "$count" -ge 1 ] || fail "no backup in apus status"
	# ... and the leader still serves.
	run redis-cli -h 127.0.0.1 -p "$(leader_port)" PING
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
