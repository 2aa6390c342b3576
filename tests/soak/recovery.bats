#!/usr/bin/env bats
# The recovery soak (make soak; not part of make test: minutes, and it
# exists to find what the suites miss): the list writer against a cluster
# as users run it (the guard on, CRIU checkpoints every 2 s and snapshots
# together, a 4 MB log that wraps every few seconds) through rounds of
# kill -9 of every node, apus stop + start of all, kill -9 of the leader
# and of a backup, and a paused leader.  After each round a leader must
# serve within 30 s; at the end every acknowledged write is at its
# position and the replicas are equal.  SOAK_ROUNDS overrides the rounds.
# Ports 18660-18739.

load ../bats/helpers
load faults

function setup() {
	requires redis
	requires_criu
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
}

function teardown() {
	keep_logs
	[ -n "${OWN_CONF:-}" ] && stop_cluster "$OWN_CONF"
	OWN_CONF=
}

# fill N - N SETs of random keys (~N x 90 bytes of log).
function fill() {
	bench -t set -n "$1" -r 100000000 -d 16 -c 20 -q >/dev/null
}

@test "list audit, guard on, 4 MB log: kill -9 of all (twice), stop/start of all, kill -9 of a leader and a backup, pause of a leader: every acknowledged write kept, a leader serves within 30 s each time" {
	OWN_CONF=$(APUS_TEST_GUARD=on make_conf "$(test_dir own18660)" 18660 4M)
	sed -i "s/^guard .*/&\ncheckpoint_interval_s = 2/" "$OWN_CONF"
	CONF=$OWN_CONF
	start_cluster "$CONF"
	local round n t0
	start_writer soak 75
	for round in ${SOAK_ROUNDS:-kill-all stop-start kill-leader kill-all pause-leader kill-backup}; do
		sleep 4
		# Fill the log between faults: it wraps about every 4 s of this load.
		fill 20000
		t0=$SECONDS
		inject "$round"
		sleep 1
		retry 290 0.1 serving_leader ||
			fail "$round: no leader serves after $((SECONDS - t0)) s: $(status_json); $(show_logs "$CONF" 15)"
		echo "$round: a leader serves after $((SECONDS - t0)) s"
	done
	audit soak 1000
	for n in $(conf_nodes "$CONF"); do
		! grep -q "stepping down from view" "$(data_dir "$n")/apus.log" ||
			echo "node $n stepped down as a leader that could not execute its log (allowed, said)"
	done
}
