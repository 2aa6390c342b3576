#!/usr/bin/env bats
# No client ever gets a reply to a request that a majority does not hold:
# with both backups frozen the leader cannot commit, so a request gets no
# answer; once they run again it is answered and every replica has it.
# Checked under both commit_wait settings (read: the server does not see
# the bytes; reply: the server runs the request but its reply is held).

load helpers

setup() {
	requires redis
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
}

teardown() {
	local n
	for n in ${FROZEN:-}; do
		kill -CONT "$n" 2>/dev/null || true
	done
	stop_cluster "${CONF:-}"
}

# all_stopped PID... - every thread of every PID is stopped (state T).
all_stopped() {
	local p
	for p in "$@"; do
		! grep -hqv '^[^)]*) T ' /proc/"$p"/task/*/stat 2>/dev/null || return 1
	done
}

held_until_majority() {
	local mode=$1 portbase=$2 port pids=() pid out
	CONF=$(APUS_TEST_COMMIT_WAIT=$mode make_conf "$(test_dir "cw-$mode")" "$portbase")
	grep -q "^commit_wait  = $mode" "$CONF" || fail "config lacks commit_wait = $mode"
	start_cluster "$CONF"
	port=$(leader_port)
	[ "$(redis-cli -h "$(leader_host)" -p "$port" SET before 1)" = OK ] || fail "cluster does not answer"
	# A connection opened before: its request's only uncommitted input is
	# the request itself (a new connection's accept is one too).
	local conn line
	exec {conn}<>"/dev/tcp/$(leader_host)/$port"
	printf 'SET open 1\r\n' >&"$conn"
	read -r -t 10 -u "$conn" line || fail "no answer on a connection of our own"
	local bs
	bs=$(all_backups) || fail "not every other node is a backup"
	for n in $bs; do
		pids+=("$(redis_pid "$n")")
	done
	FROZEN="${pids[*]}"
	kill -STOP "${pids[@]}"
	# SIGSTOP reaches every thread a moment later: a backup's role thread
	# could still ack the next request (then it commits, rightly).
	retry 100 0.05 all_stopped "${pids[@]}" || fail "the backups did not stop"
	# The request must not be answered while no backup can hold it.
	printf 'SET held-open %s\r\n' "$mode" >&"$conn"
	redis-cli -h "$(leader_host)" -p "$port" SET held "$mode" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
	pid=$!
	sleep 1.5
	if ! kill -0 "$pid" 2>/dev/null; then
		fail "answered without a majority: '$(cat "$BATS_TEST_TMPDIR/out")'"
	fi
	if read -r -t 0.2 -u "$conn" line; then
		fail "answered on an open connection without a majority: '$line'"
	fi
	kill -CONT "${pids[@]}"
	FROZEN=
	read -r -t 10 -u "$conn" line || fail "the open connection was never answered"
	assert_eq "${line%$'\r'}" "+OK" "the open connection's reply once a majority holds it"
	exec {conn}>&-
	retry 50 0.1 bash -c "! kill -0 $pid 2>/dev/null" || fail "never answered after the backups resumed"
	wait "$pid" || true
	out=$(cat "$BATS_TEST_TMPDIR/out")
	assert_eq "$out" "OK" "reply once a majority holds it"
	wait_equal_on_all "$CONF" "$mode" GET held
	wait_equal_on_all "$CONF" "$mode" GET held-open
	wait_digests_equal "$CONF" 30
}

@test "commit_wait = read: no answer without a majority" {
	held_until_majority read 17600
}

@test "commit_wait = reply: no answer without a majority" {
	held_until_majority reply 17650
}
