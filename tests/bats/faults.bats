#!/usr/bin/env bats
# Faults of a backup under write load (issue 4, the parts that need no
# election; failover.bats has the leader's): the writer (apps/redis/audit.sh) logs every acknowledged
# request, and afterwards every one of them must be on the leader, and
# every replica must have the same DEBUG DIGEST.

load helpers

FAULT="$APUS_ROOT/scripts/fault.sh"
AUDIT="$APUS_ROOT/apps/redis/audit.sh"

function setup_file() {
	file_cluster 18000
}

# writer LOG COUNT PREFIX - start the audit writer against the leader in the
# background; its pid in WRITER.
function writer() {
	bash "$AUDIT" write --host "$(leader_host)" --port "$(leader_port)" --log "$1" \
		--count "$2" --prefix "$3" 3>&- &
	WRITER=$!
}

function audit_clean() {
	run bash "$AUDIT" check --host "$(leader_host)" --port "$(leader_port)" --log "$1" --prefix "$2"
	echo "$output"
	[ "$status" -eq 0 ] || fail "audit found lost writes: $output"
	[[ "$output" == *" 0 problem(s)"* ]] || fail "audit: $output"
}

@test "kill -9 a backup under write load, restart it: it catches up, nothing acknowledged is lost" {
	local log="$BATS_TEST_TMPDIR/kill.log" victim
	victim=$(backups | tail -n 1)
	writer "$log" 150 kill
	sleep 1
	"$FAULT" kill --config "$CONF" --node "$victim"
	wait "$WRITER"
	grep -q '^set ' "$log" || fail "the writer got no acknowledgement at all"
	! grep -q '^fail' "$log" || fail "requests failed with a backup down: $(grep -m3 '^fail' "$log")"
	"$FAULT" restart --config "$CONF" --node "$victim" 3>&-
	wait_digests_equal "$CONF" 60
	audit_clean "$log" kill
	assert_eq "$(admin "$victim" GET kill:ctr)" "$(admin 0 GET kill:ctr)" "the counter on the restarted node"
}

@test "partition a backup, keep writing, heal: it catches up" {
	[ -n "${APUS_TEST_NETNS:-}" ] || skip "needs each replica in a network namespace (APUS_TEST_NETNS=1)"
	local log="$BATS_TEST_TMPDIR/part.log" victim leader view
	victim=$(backups | tail -n 1)
	leader=$(leader_id)
	view=$(status_node "$(status_json)" "$leader" view)
	"$FAULT" partition --config "$CONF" --node "$victim"
	CUT=$victim
	writer "$log" 200 part
	wait "$WRITER"
	# Cut off, it suspects the leader and canvasses; nobody would vote.
	retry 30 0.2 grep -q "pre-vote for view" "$(data_dir "$victim")/apus.log" ||
		fail "the cut-off backup never tried to stand"
	"$FAULT" heal --config "$CONF" --node "$victim"
	CUT=
	! grep -q '^fail' "$log" || fail "requests failed with a backup cut off: $(grep -m3 '^fail' "$log")"
	wait_digests_equal "$CONF" 60
	audit_clean "$log" part
	# The pre-vote kept it from deposing a leader the majority still hears.
	assert_eq "$(leader_id)/$(status_node "$(status_json)" "$leader" view)" "$leader/$view" \
		"leader and view after the partition healed"
	! grep -q "stepping down" "$(data_dir "$leader")/apus.log" || fail "the leader stepped down"
}

function teardown() {
	# Never leave a cut-off replica behind a failed test.
	[ -n "${CUT:-}" ] && "$FAULT" heal --config "$CONF" --node "$CUT" 2>/dev/null
	return 0
}
