#!/usr/bin/env bats
# Checkpoints of backups (issue 5), with real CRIU and real Redis:
# apus checkpoint under write load, kill -9, apus restore -> the same DEBUG
# DIGEST as the leader; a backup whose server has a replay connection in
# its listening socket's backlog is not imaged (CRIU would fail), and says
# why; a damaged checkpoint is refused and an older one used; the leader
# is never checkpointed; the guard takes checkpoints by itself and
# restores a crashed backup; a dump whose server dies is stopped; without
# CRIU, apus start says so in one line and replication works on.

load helpers

function setup_file() {
	have root && command -v criu >/dev/null 2>&1 || return 0
	file_cluster 18200
}

function setup() {
	requires redis
	requires_criu
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
}

function teardown() {
	[ -n "${OWN_CONF:-}" ] && stop_cluster "$OWN_CONF"
	OWN_CONF=
	pkill -f "sleep 600.5" || true	# a hung dump's stand-in, if a test failed
}

# checkpoint NODE - apus checkpoint; prints its id.
function checkpoint() {
	local out
	out=$("$APUS" checkpoint --config "$CONF" --node "$1" 3>&-) || fail "apus checkpoint --node $1 failed: $out"
	echo "$out" >&2
	sed -n 's/^checkpoint \([^ ]*\) of node.*/\1/p' <<<"$out"
}

@test "a backup checkpointed under write load, killed and restored has the leader's digest" {
	local victim pid id out
	victim=$(backups | tail -n 1)
	pid=$(redis_pid "$victim")
	load_leader 2000 before
	load_leader 3000 during &
	local loader=$!
	sleep 0.2
	id=$(checkpoint "$victim")
	[ -n "$id" ] || fail "no checkpoint id"
	wait "$loader"
	kill -KILL "$pid"
	wait_pids_gone 5 "$pid" || fail "node $victim did not die"
	load_leader 500 after
	run "$APUS" restore --config "$CONF" --node "$victim" 3>&-
	echo "$output"
	[ "$status" -eq 0 ] || fail "apus restore failed: $output"
	[[ "$output" == *"restored from checkpoint $id"* ]] || fail "restored from another checkpoint: $output"
	assert_eq "$(redis_pid "$victim")" "$pid" "the restored server's pid"
	wait_digests_equal "$CONF" 60
	assert_eq "$(admin "$victim" GET after:ctr)" 500 "a counter written after the checkpoint"
	grep -q "restored from a checkpoint at entry" "$(data_dir "$victim")/apus.log" ||
		fail "the restored node did not notice it came back"
}

@test "a backup whose server has not accepted a replay connection yet is not imaged and says why (CRIU fails on a listening socket's backlog); once it has, its image brings that connection's write back" {
	local victim pid sleeper id
	victim=$(backups | head -n 1)
	pid=$(redis_pid "$victim")
	# Its server busy on its admin socket (not an input of the log): the
	# replay's connection for the client below waits in the backlog.
	admin "$victim" DEBUG SLEEP 4 >/dev/null &
	sleeper=$!
	sleep 0.3
	redis-cli -h "$(leader_host)" -p "$(leader_port)" SET backlog:key v >/dev/null
	run "$APUS" checkpoint --config "$CONF" --node "$victim" 3>&-
	echo "$output"
	[ "$status" -ne 0 ] || fail "imaged while a replay connection was not accepted: $output"
	[[ "$output" == *"had not accepted 1 of its replay's connections"* ]] || fail "unclear message: $output"
	wait "$sleeper"
	id=$(checkpoint "$victim")
	[ -n "$id" ] || fail "no checkpoint once the server had accepted it"
	kill -KILL "$pid"
	wait_pids_gone 5 "$pid" || fail "node $victim did not die"
	run "$APUS" restore --config "$CONF" --node "$victim" --checkpoint "$id" 3>&-
	[ "$status" -eq 0 ] || fail "apus restore failed: $output"
	wait_digests_equal "$CONF" 60
	assert_eq "$(admin "$victim" GET backlog:key)" v "the write of the connection accepted late"
}

@test "a damaged checkpoint is refused with a clear message and an older one is used" {
	local victim pid old new dir out
	victim=$(backups | tail -n 1)
	load_leader 500 old
	old=$(checkpoint "$victim")
	load_leader 500 new
	new=$(checkpoint "$victim")
	[ "$old" != "$new" ] || fail "the second checkpoint has the first's id"
	dir="$(data_dir "$victim")/checkpoints/$new/images"
	# Flip bytes in the middle of the largest image file.
	local img
	img=$(ls -S "$dir"/*.img | head -n 1)
	printf 'DAMAGED' | dd of="$img" bs=1 seek=4096 conv=notrunc status=none
	pid=$(redis_pid "$victim")
	kill -KILL "$pid"
	wait_pids_gone 5 "$pid" || fail "node $victim did not die"
	run "$APUS" restore --config "$CONF" --node "$victim" --checkpoint "$new" 3>&-
	[ "$status" -ne 0 ] || fail "restore from a damaged checkpoint succeeded"
	[[ "$output" == *"checkpoint $new of node $victim is damaged"*"does not match its checksum"* ]] ||
		fail "unclear message: $output"
	run "$APUS" restore --config "$CONF" --node "$victim" 3>&-
	echo "$output"
	[ "$status" -eq 0 ] || fail "apus restore failed: $output"
	[[ "$output" == *"$new"*"is damaged"*"trying an older one"* ]] || fail "no damage reported: $output"
	[[ "$output" == *"restored from checkpoint $old"* ]] || fail "not restored from the older one: $output"
	wait_digests_equal "$CONF" 60
}

@test "the leader is never checkpointed; apus checkpoints lists index and size" {
	local leader victim
	leader=$(leader_id)
	run "$APUS" checkpoint --config "$CONF" --node "$leader" 3>&-
	[ "$status" -ne 0 ] || fail "the leader was checkpointed"
	[[ "$output" == *"only backups are checkpointed"* ]] || fail "unclear message: $output"
	victim=$(backups | head -n 1)
	checkpoint "$victim" >/dev/null
	run "$APUS" checkpoints --config "$CONF" --node "$victim" --json
	[ "$status" -eq 0 ] || fail "apus checkpoints failed: $output"
	[[ "$output" == *'"index": '[1-9]* ]] || fail "no index: $output"
	[[ "$output" == *'"image_bytes": '[1-9]* ]] || fail "no image size: $output"
	run "$APUS" restore --config "$CONF" --node "$victim" 3>&-
	[ "$status" -ne 0 ] || fail "restored over a running node"
	[[ "$output" == *"is running"* ]] || fail "unclear message: $output"
}

# own_cluster PORTBASE EXTRA-CONFIG-LINE... - a cluster of this test's own
# with a guard per node; its config in OWN_CONF (and CONF).
function own_cluster() {
	local base=$1 line
	shift
	OWN_CONF=$(APUS_TEST_GUARD=on make_conf "$(test_dir "own$base")" "$base")
	for line in "$@"; do
		sed -i "s/^guard .*/&\n$line/" "$OWN_CONF"
	done
	CONF=$OWN_CONF
}

@test "the guard checkpoints a backup by itself and restores it when it crashes" {
	own_cluster 18240 "checkpoint_interval_s = 1"
	start_cluster "$CONF"
	local victim pid ckdir
	victim=$(backups | tail -n 1)
	ckdir="$(data_dir "$victim")/checkpoints"
	load_leader 1000 g1
	retry 100 0.1 compgen -G "$ckdir/0*" >/dev/null || fail "the guard took no checkpoint: $(cat "$(data_dir "$victim")/apus.guard.log")"
	load_leader 1000 g2
	pid=$(redis_pid "$victim")
	kill -KILL "$pid"
	retry 100 0.1 grep -q "restored from checkpoint" "$(data_dir "$victim")/apus.guard.log" ||
		fail "the guard did not restore it: $(cat "$(data_dir "$victim")/apus.guard.log")"
	load_leader 100 g3
	wait_digests_equal "$CONF" 60
	assert_eq "$(redis_pid "$victim")" "$pid" "the restored server's pid"
	run "$APUS" stop --config "$CONF" 3>&-
	[ "$status" -eq 0 ] || fail "apus stop failed: $output"
	! pgrep -f "apus guard --config $CONF" >/dev/null || fail "a guard survived apus stop"
}

# A dump whose server is killed while it holds it: CRIU (4.2) then waited
# for ever on the threads it traced, zombies it never reaped.  The stand-in
# holds the server the same way (gdb attached to every thread, then
# idle); the guard must see the server dead, stop the dump, say so, and
# bring the node back.
@test "a dump whose server dies is stopped: the guard says so and restores the node" {
	command -v gdb >/dev/null || skip "test requires gdb (scripts/install-deps.sh)"
	own_cluster 18400 "checkpoint_interval_s = 1"
	local victim pid dir log t0
	dir=$(test_dir wrap)
	mkdir -p "$dir"
	# Dumps of the pid in $dir/victim hang, tracing it; every other
	# criu call is real.
	cat >"$dir/criu" <<-EOF
		#!/bin/sh
		if [ "\$1 \$2 \$3" = "dump -t \$(cat $dir/victim 2>/dev/null)" ]; then
			touch $dir/started
			exec gdb -p "\$3" -batch -ex "shell sleep 600.5"
		fi
		exec criu "\$@"
	EOF
	chmod +x "$dir/criu"
	APUS_CRIU=$dir/criu start_cluster "$CONF"
	victim=$(backups | tail -n 1)
	log="$(data_dir "$victim")/apus.guard.log"
	pid=$(redis_pid "$victim")
	echo "$pid" >"$dir/victim"
	load_leader 200 d1
	retry 100 0.1 test -e "$dir/started" || fail "no dump started: $(cat "$log")"
	retry 100 0.1 grep -q "TracerPid:[[:space:]]*[1-9]" "/proc/$pid/status" || fail "the stand-in never traced the server"
	t0=$SECONDS
	kill -KILL "$pid"
	retry 150 0.1 grep -q "died during its dump" "$log" ||
		fail "the guard did not stop the dump in 15 s: $(cat "$log")"
	retry 150 0.1 grep -q "node $victim started again\\|restored from checkpoint" "$log" ||
		fail "the node did not come back: $(cat "$log")"
	echo "# the dump was stopped and the node back after $((SECONDS - t0)) s" >&3
	! pgrep -f "gdb -p $pid" >/dev/null || fail "the hung dump survived"
	load_leader 100 d2
	wait_digests_equal "$CONF" 60
}

@test "without CRIU apus start says so in one line and replication works on" {
	own_cluster 18270 "checkpoint_interval_s = 1"
	need_apus
	kill_port_leftovers "$CONF"
	run env APUS_CRIU=/nonexistent/criu timeout 120 "$APUS" start --config "$CONF" 3>&-
	echo "$output"
	[ "$status" -eq 0 ] || fail "apus start failed without CRIU: $output"
	assert_eq "$(grep -c 'checkpoints are off' <<<"$output")" 1 "lines about CRIU"
	[[ "$output" == *"checkpoints are off: /nonexistent/criu not found"* ]] || fail "unclear: $output"
	retry 50 0.2 leader_port "$CONF" || fail "no leader"
	load_leader 200 nocriu
	wait_digests_equal "$CONF" 60
	run env APUS_CRIU=/nonexistent/criu "$APUS" checkpoint --config "$CONF" --node "$(backups | head -n 1)" 3>&-
	[ "$status" -ne 0 ] || fail "a checkpoint without CRIU succeeded"
	[[ "$output" == *"criu not found"* ]] || fail "unclear: $output"
}
