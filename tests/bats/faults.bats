#!/usr/bin/env bats
# Faults of a backup under write load (issue 4, the parts that need no
# election): the writer (apps/redis/audit.sh) logs every acknowledged
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
	writer "$log" 300 kill
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
	local log="$BATS_TEST_TMPDIR/part.log" victim
	victim=$(backups | tail -n 1)
	"$FAULT" partition --config "$CONF" --node "$victim"
	writer "$log" 200 part
	wait "$WRITER"
	"$FAULT" heal --config "$CONF" --node "$victim"
	! grep -q '^fail' "$log" || fail "requests failed with a backup cut off: $(grep -m3 '^fail' "$log")"
	wait_digests_equal "$CONF" 60
	audit_clean "$log" part
}

# wait_suspects NODE WANT - wait (3 s) until NODE's suspects_leader is WANT.
function wait_suspects() {
	local i
	for ((i = 0; i < 30; i++)); do
		[ "$(status_node "$(status_json)" "$1" suspects_leader)" = "$2" ] && return 0
		sleep 0.1
	done
	fail "node $1: suspects_leader is not $2 after 3 s: $(status_json)"
}

@test "a paused leader is suspected by every backup after suspect_ms, and trusted again when it runs" {
	local leader b
	leader=$(leader_id)
	"$FAULT" pause --config "$CONF" --node "$leader"
	PAUSED=$leader
	for b in $(backups); do
		wait_suspects "$b" true
		grep -q "leader node $leader suspected: no heartbeat for" "$(data_dir "$b")/apus.log" ||
			fail "node $b did not log its suspicion"
	done
	"$FAULT" resume --config "$CONF" --node "$leader"
	PAUSED=
	for b in $(backups); do
		wait_suspects "$b" false
	done
	run redis-cli -h "$(leader_host)" -p "$(leader_port)" SET after-pause 1
	assert_eq "$output" OK "SET after the leader resumed"
}

function teardown() {
	# Never leave a stopped leader behind a failed test.
	[ -n "${PAUSED:-}" ] && "$FAULT" resume --config "$CONF" --node "$PAUSED" 2>/dev/null
	return 0
}
