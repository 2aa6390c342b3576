#!/usr/bin/env bats
# The CRIU the guard will use (issue 5): scripts/install-criu.sh installs one
# that passes `criu check` on this kernel, and it can checkpoint a running
# redis-server and bring it back with the data of the checkpoint.

load helpers

CRIU_PORT=18101

function setup() {
	requires redis
	command -v criu >/dev/null 2>&1 || skip "CRIU not installed (scripts/install-criu.sh builds one)"
	have root || skip "CRIU needs root"
}

function teardown() {
	redis-cli -p "$CRIU_PORT" shutdown nosave >/dev/null 2>&1 || true
}

@test "criu check passes on this kernel" {
	run criu check
	[[ "$output" == *"Looks good"* ]] || fail "criu check: $output"
}

@test "a running redis-server is dumped (left running) and restored with the checkpoint's data" {
	local img="$BATS_TEST_TMPDIR/img" pid i
	mkdir -p "$img"
	# A session leader: CRIU dumps and restores whole sessions.
	setsid redis-server --port "$CRIU_PORT" --bind 127.0.0.1 --save "" --appendonly no \
		--dir "$BATS_TEST_TMPDIR" --daemonize no >"$BATS_TEST_TMPDIR/redis.log" 2>&1 3>&- &
	retry 50 0.1 redis-cli -p "$CRIU_PORT" PING
	pid=$(redis-cli -p "$CRIU_PORT" INFO server | tr -d '\r' | sed -n 's/^process_id://p')
	redis-cli -p "$CRIU_PORT" SET before-checkpoint 1 >/dev/null
	run criu dump -t "$pid" -D "$img" --leave-running -o dump.log
	[ "$status" -eq 0 ] || fail "criu dump failed: $(tail -n 5 "$img/dump.log")"
	# Still serving after the dump; later writes are not in the checkpoint.
	assert_eq "$(redis-cli -p "$CRIU_PORT" SET after-checkpoint 1)" OK "SET after the dump"
	kill -KILL "$pid"
	wait_pids_gone 5 "$pid" || fail "redis did not die"
	# Its pid may stay taken for a moment after the kill: retry.
	for ((i = 0; i < 30; i++)); do
		criu restore -D "$img" -d -o restore.log && break
		sleep 0.2
	done
	[ "$i" -lt 30 ] || fail "criu restore failed: $(tail -n 5 "$img/restore.log")"
	retry 50 0.1 redis-cli -p "$CRIU_PORT" PING
	assert_eq "$(redis-cli -p "$CRIU_PORT" GET before-checkpoint)" 1 "key from before the checkpoint"
	assert_eq "$(redis-cli -p "$CRIU_PORT" EXISTS after-checkpoint)" 0 "key from after the checkpoint"
}
