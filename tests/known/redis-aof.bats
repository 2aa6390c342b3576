#!/usr/bin/env bats
# tests/known/: what users need that FAILS today (sometimes, here), naming
# the bug; not part of make test (`bats tests/known/`).  A child's end is
# an input of the log (coordinator/input_child.h), including a child
# forked from the server's timers (its only child is the twin of the
# leader's).  Under load it still fails in about 1 run in 3 (2026-11-27:
# 3 of 8 with two busy loops beside it): a backup ends without after:N,
# the key written right after round N's DEBUG LOADAOF.  The cause: DEBUG
# RELOAD saves dump.rdb and loads it back, and on that backup a BGSAVE
# child of the round, still running there (the leader's had exited before
# the command came), renamed its older dump.rdb into place between the
# two (Redis's log shows the backup's reload loading one key fewer).  A
# child's exit, not only its end, is an input: logging it (an entry before
# the leader's next input, the backups' replay holding that input until
# their own child exited) made this pass 10 of 10, but a LASTSAVE test
# (determinism.bats) then failed 1-2 runs in 12 under the same load
# against 0 in 12 without, unexplained: not kept (BENCHMARKS.md).  Alone,
# on an idle machine, it passes.  Ports 19620-19699.

load ../bats/helpers

function teardown() {
	[ -n "${OWN_CONF:-}" ] && stop_cluster "$OWN_CONF"
	OWN_CONF=
	return 0
}

# aof_rounds ROUNDS - on one connection, ROUNDS times: writes, BGREWRITEAOF
# and BGSAVE every 20 ms for 0.6 s (refused while another child runs,
# started once none does, "already in progress" while its own runs), then
# DEBUG LOADAOF, BGSAVE, DEBUG RELOAD and SAVE: what each reply says, and
# the data each reload brings back, depends on where each child's end
# reached the server.
function aof_rounds() {
	local round i
	echo "CONFIG SET appendonly yes"
	for ((round = 0; round < $1; round++)); do
		for ((i = 0; i < 200; i++)); do
			echo "RPUSH l:$round $i"
		done
		echo "XADD st * round $round"
		echo BGREWRITEAOF
		for ((i = 0; i < 30; i++)); do
			echo BGSAVE
			sleep 0.02
		done
		echo "DEBUG LOADAOF"
		echo "RPUSH after:$round x"
		echo BGSAVE
		echo "DEBUG RELOAD"
		echo SAVE
		echo "SET pad:$round $(head -c 100000 /dev/zero | tr '\0' x)"
	done
}

@test "BGREWRITEAOF then DEBUG LOADAOF, BGSAVE then DEBUG RELOAD and SAVE: every replica the same, every reply equal, none restarted" {
	local pids j
	OWN_CONF=$(APUS_TEST_SNAPSHOTS=off make_conf "$(test_dir own19620)" 19620)
	CONF=$OWN_CONF
	start_cluster "$CONF" || fail "the cluster did not start"
	pids=$(for n in $(conf_nodes "$CONF"); do redis_pid "$n"; done)
	# Replies such as "ERR Another child process is active" depend on the
	# children's timing: they must only be the same on every replica.
	aof_rounds 3 | timeout 120 redis-cli -h "$(leader_host)" -p "$(leader_port)" >/dev/null
	[ "$(admin "$(leader_id)" LLEN l:2)" = 200 ] || fail "the last round's list is not whole on the leader"
	wait_digests_equal "$CONF" 30 || fail "digests differ: $(digests "$CONF")"
	assert_eq "$(for n in $(conf_nodes "$CONF"); do redis_pid "$n"; done)" "$pids" "a server was restarted"
	j=$(timeout 30 "$APUS" divergence --config "$CONF" --json 3>&-)
	assert_eq "$(json_field "$(strip_nodes "$j")" total)" 0 "divergence records: $j"
	stop_cluster "$CONF"
	OWN_CONF=
}

