#!/usr/bin/env bats
# Failover (issue 4): the leader dies, pauses or is cut off under audited
# write load; a new leader is elected and serves; every acknowledged write
# survives (apps/redis/audit.sh follows the leader through apus status);
# every live replica ends with the same DEBUG DIGEST.

load helpers

FAULT="$APUS_ROOT/scripts/fault.sh"
AUDIT="$APUS_ROOT/apps/redis/audit.sh"

function setup_file() {
	file_cluster 18100
}

# writer LOG COUNT PREFIX - the audit writer, following the leader, in the
# background; its pid in WRITER.
function writer() {
	APUS_BIN="$APUS" bash "$AUDIT" write --config "$CONF" --log "$1" --count "$2" --prefix "$3" 3>&- &
	WRITER=$!
}

function audit_clean() {
	run env APUS_BIN="$APUS" bash "$AUDIT" check --config "$CONF" --log "$1" --prefix "$2"
	echo "$output"
	[ "$status" -eq 0 ] || fail "audit found lost writes: $output"
	[[ "$output" == *" 0 problem(s)"* ]] || fail "audit: $output"
}

# live_digests_equal NODES - every node of NODES has the same DEBUG DIGEST (30 s).
function live_digests_equal() {
	local deadline=$((SECONDS + 30)) n first d ok
	while :; do
		ok=1 first=
		for n in $1; do
			d=$(admin "$n" DEBUG DIGEST 2>&1)
			[[ "$d" =~ ^[0-9a-f]{40}$ ]] || ok=0
			[ -z "$first" ] && first=$d
			[ "$d" = "$first" ] || ok=0
		done
		[ "$ok" -eq 1 ] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			for n in $1; do echo "node $n: $(admin "$n" DEBUG DIGEST 2>&1) $(admin "$n" DBSIZE 2>&1)" >&2; done
			show_logs "$CONF" 10 >&2
			fail "replicas $1 differ"
		fi
		sleep 0.5
	done
}

function others() {
	local n
	for n in $(conf_nodes "$CONF"); do [ "$n" != "$1" ] && echo "$n"; done
}

@test "kill -9 the leader under write load: a new leader serves, nothing acknowledged is lost" {
	local log="$BATS_TEST_TMPDIR/kill.log" old
	old=$(leader_id)
	writer "$log" 200 lkill
	sleep 1
	"$FAULT" kill --config "$CONF" --node "$old"
	wait_new_leader "$old"
	wait "$WRITER"
	grep -q '^set ' "$log" || fail "the writer got no acknowledgement at all"
	audit_clean "$log" lkill
	# Writes went on after the failover, not only before it.
	[ "$(grep -c '^set ' "$log")" -gt 100 ] || fail "too few writes acknowledged: $(grep -c '^set ' "$log") of 200"
	live_digests_equal "$(others "$old")"
	grep -q "serving clients as leader of view" "$(data_dir "$NEW")/apus.log" || fail "node $NEW never served"
	# The old leader comes back as a backup and catches up from the new leader's log.
	"$FAULT" restart --config "$CONF" --node "$old" 3>&-
	wait_digests_equal "$CONF" 60
	[ "$(leader_id)" = "$NEW" ] || fail "the restarted node took the lead back: $(status_json)"
	assert_eq "$(status_node "$(status_json)" "$old" role)" backup "role of the restarted node"
}

@test "a paused leader is replaced; resumed, it answers nothing of its old view, steps down and catches up" {
	local old port host r
	old=$(leader_id)
	port=$(app_port "$old") host=$(node_host "$old")
	run timeout 5 redis-cli -h "$host" -p "$port" SET before-pause 1
	assert_eq "$output" OK "SET before the pause"
	"$FAULT" pause --config "$CONF" --node "$old"
	PAUSED=$old
	wait_new_leader "$old"
	# A client of the paused leader: its request sits in the socket.
	timeout 20 redis-cli -h "$host" -p "$port" SET stale-write 1 >"$BATS_TEST_TMPDIR/stale" 2>&1 3>&- &
	local client=$!
	run timeout 5 redis-cli -h "$(node_host "$NEW")" -p "$(app_port "$NEW")" SET during-pause 1
	assert_eq "$output" OK "SET on the new leader"
	sleep 0.5
	"$FAULT" resume --config "$CONF" --node "$old"
	PAUSED=
	wait "$client" || true
	r=$(cat "$BATS_TEST_TMPDIR/stale")
	[ "$r" != OK ] || fail "the deposed leader acknowledged a write of its old view"
	# It steps down (rebuilding its server) and rejoins as a backup.
	retry 100 0.2 bash -c "grep -q 'stepping down from view' '$(data_dir "$old")/apus.log'"
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(status_node "$(status_json)" "$old" role)" = backup ] && break
		sleep 0.2
	done
	assert_eq "$(status_node "$(status_json)" "$old" role)" backup "role of the resumed node"
	run timeout 5 redis-cli -h "$(node_host "$NEW")" -p "$(app_port "$NEW")" SET after-resume 1
	assert_eq "$output" OK "SET after the old leader resumed"
	wait_digests_equal "$CONF" 60
	assert_eq "$(admin "$old" GET stale-write)" "" "the unacknowledged write on the old leader"
	assert_eq "$(admin "$old" GET during-pause)" 1 "the new view's write on the old leader"
}

@test "a paused leader whose server has a fork child still running (a slow BGSAVE) re-executes and rejoins" {
	local old child i
	old=$(leader_id)
	run bash -c "seq 200 | sed 's/^/SET forkkey:/; s/$/ v/' |
		timeout 10 redis-cli -h '$(node_host "$old")' -p '$(app_port "$old")' | grep -c OK"
	assert_eq "$output" 200 "SETs before the fork"
	# Over the admin socket, so only this node's server forks: a child
	# that lives at least 12 s (200 keys x 60 ms).
	admin "$old" CONFIG SET rdb-key-save-delay 60000 >/dev/null
	assert_eq "$(admin "$old" BGSAVE)" "Background saving started" "BGSAVE on node $old"
	child=$(pgrep -P "$(redis_pid "$old")" | head -n 1)
	[ -n "$child" ] || fail "no fork child of node $old's server"
	"$FAULT" pause --config "$CONF" --node "$old"
	PAUSED=$old
	wait_new_leader "$old"
	"$FAULT" resume --config "$CONF" --node "$old"
	PAUSED=
	run timeout 5 redis-cli -h "$(node_host "$NEW")" -p "$(app_port "$NEW")" SET after-resume 1
	assert_eq "$output" OK "SET on the new leader"
	# The re-executed server must not wait for the child to end.
	for ((i = 0; i < 50; i++)); do
		[ "$(status_node "$(status_json)" "$old" role)" = backup ] && break
		sleep 0.2
	done
	kill -0 "$child" 2>/dev/null || fail "the fork child ended before the test could tell"
	assert_eq "$(status_node "$(status_json)" "$old" role)" backup "role of the resumed node"
	wait_equal_on_all_of "$old" 1 GET after-resume
	kill -KILL "$child" 2>/dev/null || true
	wait_digests_equal "$CONF" 60
}

# The soak of leader kills (make test-full): durability kills three leaders in turn.
# bats test_tags=soak
@test "six leader kills in a row under load: each node leads at least once, the audit is clean each time" {
	local log old round led=" "
	for ((round = 1; round <= 6; round++)); do
		log="$BATS_TEST_TMPDIR/ten-$round.log"
		old=$(leader_id)
		led+="$old "
		writer "$log" 40 "ten$round"
		sleep 0.3
		"$FAULT" kill --config "$CONF" --node "$old"
		wait_new_leader "$old"
		wait "$WRITER"
		audit_clean "$log" "ten$round"
		"$FAULT" restart --config "$CONF" --node "$old" 3>&-
		led+="$NEW "
	done
	local n
	for n in $(conf_nodes "$CONF"); do
		[[ "$led" == *" $n "* ]] || fail "node $n never led (leaders: $led)"
	done
	wait_digests_equal "$CONF" 60
}

@test "whole-cluster kill -9 and restart: state comes back from the durable logs" {
	local log="$BATS_TEST_TMPDIR/all.log" n pids=()
	writer "$log" 100 all
	wait "$WRITER"
	wait_digests_equal "$CONF" 30
	local before
	before=$(admin 0 DEBUG DIGEST)
	for n in $(conf_nodes "$CONF"); do pids+=("$(redis_pid "$n")"); done
	kill -KILL "${pids[@]}"
	wait_pids_gone 10 "${pids[@]}" || fail "servers survived kill -9"
	start_cluster "$CONF"
	wait_new_leader -1
	audit_clean "$log" all
	wait_digests_equal "$CONF" 60
	assert_eq "$(admin 0 DEBUG DIGEST)" "$before" "digest after the restart"
	run timeout 5 redis-cli -h "$(leader_host)" -p "$(leader_port)" SET after-restart 1
	assert_eq "$output" OK "SET after the restart"
}

@test "partition the leader from both backups: the majority elects, the minority leader acknowledges nothing" {
	[ -n "${APUS_TEST_NETNS:-}" ] || skip "needs each replica in a network namespace (APUS_TEST_NETNS=1)"
	local old host port r
	old=$(leader_id)
	host=$(node_host "$old") port=$(app_port "$old")
	"$FAULT" partition --config "$CONF" --node "$old"
	PARTED=$old
	wait_new_leader "$old"
	# The cut-off leader still thinks it leads: a client inside its
	# namespace reaches it, and must get no acknowledgement.
	# (It either holds the write for want of a majority, which the timeout
	# ends, or refuses it once it learns it is deposed.)
	r=$(ip netns exec "$(conf_node_get "$CONF" "$old" netns)" timeout 3 redis-cli -h "$host" -p "$port" SET minority 1 2>&1) || true
	[ "$r" != OK ] || fail "the minority leader acknowledged a write"
	run timeout 5 redis-cli -h "$(node_host "$NEW")" -p "$(app_port "$NEW")" SET majority 1
	assert_eq "$output" OK "SET on the majority's leader"
	"$FAULT" heal --config "$CONF" --node "$old"
	PARTED=
	local i
	for ((i = 0; i < 150; i++)); do
		[ "$(status_node "$(status_json)" "$old" role)" = backup ] && break
		sleep 0.2
	done
	assert_eq "$(status_node "$(status_json)" "$old" role)" backup "role of the healed node"
	wait_digests_equal "$CONF" 60
	assert_eq "$(admin "$old" GET minority)" "" "the minority write"
}

@test "leader_hook runs on the new leader with the view and node id" {
	local old out
	out="$BATS_TEST_TMPDIR/hook.out"
	stop_cluster "$CONF"
	# A fresh cluster: restarting this file's one would replay every
	# connection the tests above made (thousands, ten restarts' worth of
	# TIME_WAIT on 127.0.0.1), which is the restart test's business.
	CONF=$(make_conf "$(test_dir hook)" 18700)
	HOOK_CONF=$CONF
	sed -i '/^leader_hook/d' "$CONF"
	sed -i "s|^app_cmd|leader_hook  = echo view=\$APUS_VIEW node=\$APUS_LEADER >> $out\\napp_cmd|" "$CONF"
	start_cluster "$CONF"
	old=$(leader_id)
	"$FAULT" kill --config "$CONF" --node "$old"
	wait_new_leader "$old"
	retry 50 0.1 grep -q "node=$NEW" "$out"
	grep -q "^view=[1-9][0-9]* node=$NEW\$" "$out" || fail "hook output: $(cat "$out")"
	# The old leader comes back with an empty log, so as view 0's leader
	# until the others depose it: it must not run the hook (it would take
	# a virtual IP from the real leader).
	local before i
	before=$(wc -l < "$out")
	"$FAULT" restart --config "$CONF" --node "$old" 3>&-
	for ((i = 0; i < 100; i++)); do
		[ "$(status_node "$(status_json)" "$old" role)" = backup ] && break
		sleep 0.1
	done
	assert_eq "$(status_node "$(status_json)" "$old" role)" backup "role of the restarted old leader"
	assert_eq "$(wc -l < "$out")" "$before" "hook runs after the old leader's restart ($(tail -n +$((before + 1)) "$out"))"
	# Deposed, it re-executed its server from our role thread, which
	# blocks every signal: the fresh server must still take SIGTERM.
	grep -q "re-executing" "$(data_dir "$old")/apus.log" || fail "the old leader did not re-execute"
	run timeout 60 "$APUS" stop --config "$CONF" --node "$old" 3>&-
	assert_eq "$status" 0 "apus stop --node $old: $output"
	[[ "$output" != *"ignored SIGTERM"* ]] || fail "the re-executed server ignored SIGTERM: $output"
}

function teardown() {
	# Never leave a stopped or cut-off node behind a failed test.
	[ -n "${PAUSED:-}" ] && "$FAULT" resume --config "$CONF" --node "$PAUSED" 2>/dev/null
	[ -n "${PARTED:-}" ] && "$FAULT" heal --config "$CONF" --node "$PARTED" 2>/dev/null
	# The leader_hook test's own cluster (teardown_file never sees it).
	[ -n "${HOOK_CONF:-}" ] && stop_cluster "$HOOK_CONF"
	return 0
}
