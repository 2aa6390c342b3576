#!/usr/bin/env bats
# One recovery model (issue 28): a node's snapshot and its guard's CRIU
# checkpoints are recovery points of one kind, and the newest is the one
# used; a node's recoverability is judged from the state its server holds;
# a new leader that cannot execute its log steps down; what keeps recovery
# points from being made is shown in apus status.  Real Redis, real CRIU,
# the guard on, a 1 MB log that wraps.  Ports 18600-18699.

load helpers

function setup_file() {
	have root && command -v criu >/dev/null 2>&1 || return 0
	# CRIU gives a restored process its pids and thread ids back: with the
	# default pid_max (32768) the suites' thousands of short processes
	# wrap it within minutes, and a thread id an image needs is then often
	# taken (doc/operator-guide.md, "Checkpoints and the guard").
	[ "$(cat /proc/sys/kernel/pid_max)" -ge 4194304 ] || echo 4194304 >/proc/sys/kernel/pid_max || true
	APUS_TEST_GUARD=on file_cluster 18600 1M
}

function setup() {
	requires redis
	requires_criu
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
	# Each test starts from the whole file cluster serving, whatever the
	# one before left stopped.
	timeout 120 "$APUS" start --config "$CONF" >/dev/null 2>&1 3>&- ||
		fail "the file's cluster does not start: $(status_json)"
	rebuild_left_behind
	retry 100 0.2 all_backups >/dev/null || fail "not every node runs: $(status_json)"
}

function teardown() {
	# A server test 2 slowed that is still there (its kill failed): the
	# next tests' snapshots must not wait on it.
	[ -n "${SLOW_SAVES:-}" ] && admin "$SLOW_SAVES" CONFIG SET rdb-key-save-delay 0 >/dev/null 2>&1
	SLOW_SAVES=
	end_writer
	WRITER=
	[ -n "${OWN_CONF:-}" ] && stop_cluster "$OWN_CONF"
	OWN_CONF=
	# The file's cluster again for the next test.
	CONF=$FILE_CONF
}

FILE_CONF=${CONF:-}

# fill N - N SETs of random keys: ~N x 90 bytes of log (a 1 MB log wraps
# about N / 11,000 times).
function fill() {
	bench -t set -n "$1" -r 100000000 -d 16 -c 20 -q >/dev/null
}

# checkpoint NODE - apus checkpoint; prints "ID INDEX".
function checkpoint() {
	local out
	out=$("$APUS" checkpoint --config "$CONF" --node "$1" --json 3>&-) ||
		fail "apus checkpoint --node $1 failed: $out"
	tr -d ' ' <<<"$out" | sed -n 's/.*"id":"\([^"]*\)".*"index":\([0-9]*\).*/\1 \2/p'
}

# snapshot_past NODE INDEX - NODE's recovery point is a snapshot past INDEX.
function snapshot_past() {
	local j
	j=$(status_json) || return 1
	[ "$(status_node "$j" "$1" recovery_point)" = snapshot ] &&
		[ "$(status_node "$j" "$1" recovery_point_index)" -gt "$2" ]
}

@test "a backup that dies with a snapshot newer than its newest checkpoint is started from the snapshot, not restored to the image" {
	local victim id idx pid glog
	victim=$(backups | tail -n 1)
	load_leader 200 a
	read -r id idx < <(checkpoint "$victim")
	[ -n "$idx" ] || fail "no checkpoint index"
	fill 25000
	retry 100 0.2 snapshot_past "$victim" "$idx" ||
		fail "node $victim took no snapshot past its checkpoint at entry $idx: $(status_json)"
	glog="$(data_dir "$victim")/apus.guard.log"
	pid=$(redis_pid "$victim")
	kill -KILL "$pid"
	retry 150 0.1 grep -q "node $victim started again" "$glog" || fail "the guard did not bring it back: $(cat "$glog")"
	grep -q "newer than its newest checkpoint (entry $idx)" "$glog" ||
		fail "the guard does not say why it did not restore: $(cat "$glog")"
	! grep -q "restored from checkpoint $id" "$glog" || fail "the guard restored the older image: $(cat "$glog")"
	[ "$(redis_pid "$victim")" != "$pid" ] || fail "the pid of the old server came back"
	load_leader 100 b
	wait_digests_equal "$CONF" 60
	assert_eq "$(admin "$victim" GET b:ctr)" 100 "a counter written after the restart"
	retry 50 0.2 eval '[ "$(status_node "$(status_json)" "$victim" recoverable)" = true ]' ||
		fail "node $victim is not recoverable: $(status_json)"
}

@test "a server killed while its BGSAVE child still writes: that child is ended before the node comes back, and the node's state equals its peers'" {
	local victim pid child out glog mark
	victim=$(backups | tail -n 1)
	load_leader 200 a
	glog="$(data_dir "$victim")/apus.guard.log"
	mark=$(wc -l <"$glog")
	# The server that answers on the admin socket, the one whose config we
	# change: apus.pid may still name one that the last test replaced.
	pid=$(admin "$victim" INFO server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')
	[ -n "$pid" ] || fail "node $victim's server gives no process_id"
	# A save that would take hours: 0.1 s a key.  Its child, orphaned,
	# would rename its file (the server's state now, no entry's) over the
	# snapshot the next server loads.
	SLOW_SAVES=$victim
	admin "$victim" CONFIG SET rdb-key-save-delay 100000 >/dev/null
	retry 100 0.1 eval '[ "$(admin "$victim" BGSAVE)" = "Background saving started" ]' ||
		fail "BGSAVE on node $victim did not start: $(admin "$victim" BGSAVE)"
	child=$(pgrep -P "$pid" redis | head -n 1)
	[ -n "$child" ] || fail "no BGSAVE child of pid $pid"
	# Stopped, it outlives its parent for sure (running, Redis's child
	# exits within a second of it, at its next report to the parent).
	kill -STOP "$child"
	kill -KILL "$pid"
	retry 150 0.1 eval 'tail -n +"$((mark + 1))" "$glog" | grep -q "node $victim \(started again\|died as a backup: restored\)"' ||
		fail "the guard did not bring node $victim back: $(cat "$glog")"
	local state
	state=$(ps -o stat= -p "$child" || true)
	if [ -n "$state" ] && [ "${state#Z}" = "$state" ]; then
		kill -KILL "$child"
		fail "the dead server's BGSAVE child (pid $child, state $state) still runs"
	fi
	load_leader 100 orphan
	wait_digests_equal "$CONF" 60
	assert_eq "$(admin "$victim" GET orphan:ctr)" 100 "a counter written after the restart"
	# A new server, without the slow saves (the next tests' snapshots
	# would wait on them for hours).
	assert_eq "$(admin "$victim" CONFIG GET rdb-key-save-delay | tail -n 1)" 0 \
		"rdb-key-save-delay of node $victim's server after its restart"
}

@test "a node restored to an image older than its log never leads; the others elect one that serves every acknowledged write" {
	local lead victim other id idx j mark
	lead=$(leader_id)
	victim=$(backups | head -n 1)
	other=$(backups | tail -n 1)
	[ "$victim" != "$other" ] || fail "want two backups: $(status_json)"
	read -r id idx < <(checkpoint "$victim")
	start_writer restored 30
	fill 25000
	retry 100 0.2 snapshot_past "$victim" "$idx" ||
		fail "node $victim took no snapshot past entry $idx: $(status_json)"
	run timeout 60 "$APUS" stop --config "$CONF" --node "$victim" 3>&-
	assert_eq "$status" 0 "apus stop --node $victim: $output"
	run timeout 60 "$APUS" restore --config "$CONF" --node "$victim" 3>&-
	[ "$status" -ne 0 ] || fail "apus restore took the older checkpoint: $output"
	[[ "$output" == *"newer than its newest checkpoint"* ]] || fail "unclear refusal: $output"
	# By hand, the operator insists: the image's entry is gone from the log.
	mark=$(wc -l <"$(data_dir "$victim")/apus.log")
	# CRIU gives the process its pids back: one still held (a zombie that
	# init has not reaped yet) fails the restore for a moment.
	local try
	for try in 1 2 3 4 5; do
		run timeout 60 "$APUS" restore --config "$CONF" --node "$victim" --checkpoint "$id" 3>&-
		[ "$status" -ne 0 ] && [[ "$output" == *"Can't fork for"* ]] || break
		sleep 2
	done
	if [ "$status" -ne 0 ]; then
		local held holder
		held=$(grep -o "Can't fork for [0-9]*" <<<"$output" | grep -o '[0-9]*$')
		# A pid stays taken while it is a live thread's id, or the process
		# group or session of a live process.
		holder=$(ps -eLo pid,tid,pgid,sid,ppid,stat,args | awk -v t="$held" '$2 == t || $3 == t || $4 == t')
		fail "apus restore --checkpoint $id: $output; holders of $held: '$holder'"
	fi
	retry 50 0.2 eval '[ "$(status_node "$(status_json)" "$victim" recoverable)" = false ]' ||
		fail "node $victim, restored to entry $idx, claims it can rebuild its state: $(status_json)"
	# Its leader goes: the one that can must lead, never the restored one.
	# (It cannot commit yet: the restored node acks nothing until it is
	# rebuilt, and a majority must hold every entry.)
	run timeout 60 "$APUS" stop --config "$CONF" --node "$lead" 3>&-
	assert_eq "$status" 0 "apus stop --node $lead: $output"
	retry 150 0.1 eval '[ "$(status_node "$(status_json)" "$other" role)" = leader ]' ||
		fail "node $other does not lead after node $lead stopped: $(status_json); $(show_logs "$CONF" 12)"
	sleep 2
	assert_eq "$(leader_id)" "$other" "the leader 2 s later"
	! tail -n +"$mark" "$(data_dir "$victim")/apus.log" | grep -q "election: won view" ||
		fail "the restored node won an election: $(tail -n 30 "$(data_dir "$victim")/apus.log")"
	# With its old leader back there is a majority that can execute.
	run timeout 60 "$APUS" start --config "$CONF" --node "$lead" 3>&-
	assert_eq "$status" 0 "apus start --node $lead: $output"
	retry 150 0.1 serving_leader || fail "no leader serves with node $lead back: $(status_json)"
	audit restored 100
	j=$(status_json)
	[ "$(status_node "$j" "$victim" recoverable)" = true ] || fail "node $victim was not rebuilt: $j"
}

@test "a CRIU dump right after a peer restarted (its old region still mapped) succeeds" {
	[ -z "${APUS_TEST_NETNS:-}" ] || skip "tcp maps no peer region"
	local victim peer
	victim=$(backups | head -n 1)
	peer=$(leader_id)
	kill -KILL "$(redis_pid "$peer")"
	retry 300 0.1 serving_leader || fail "no leader serves 30 s after node $peer died: $(status_json)"
	retry 150 0.1 grep -q "node $peer started again\|node $peer died as a backup: restored" \
		"$(data_dir "$peer")/apus.guard.log" || fail "node $peer is not back"
	retry 100 0.1 eval '[ "$(status_node "$(status_json)" "$peer" role)" = backup ]' ||
		fail "node $peer did not rejoin"
	# The new region file of the peer replaced the one the victim mapped.
	[ "$(backups | head -n 1)" = "$victim" ] || victim=$(backups | grep -vx "$peer" | head -n 1)
	run timeout 60 "$APUS" checkpoint --config "$CONF" --node "$victim" 3>&-
	assert_eq "$status" 0 "apus checkpoint right after node $peer restarted: $output"
	j=$(status_json)
	[ -z "$(status_node "$j" "$victim" recovery_point_error)" ] || fail "a failure is shown: $j"
}

@test "a new leader whose server makes no progress steps down and says why; a leader serves once a server can" {
	local lead b j n stepped=0 sleepers=()
	lead=$(leader_id)
	# Both backups' servers hang (an admin-socket DEBUG SLEEP: that socket
	# is not replicated), so what is written now piles up unexecuted
	# behind them; then the leader goes.  Whoever wins cannot catch up.
	for b in $(all_backups); do
		admin "$b" DEBUG SLEEP 12 >/dev/null &
		sleepers+=($!)
	done
	sleep 0.3
	load_leader 100 stall
	run timeout 60 "$APUS" stop --config "$CONF" --node "$lead" 3>&-
	assert_eq "$status" 0 "apus stop --node $lead: $output"
	retry 300 0.1 serving_leader || fail "no leader serves 30 s after node $lead stopped: $(status_json)"
	j=$(status_json)
	for n in $(conf_nodes "$CONF"); do
		[ "$n" = "$lead" ] && continue
		[ "$(status_node "$j" "$n" stepdowns)" -ge 1 ] 2>/dev/null || continue
		stepped=$((stepped + 1))
		[[ "$(status_node "$j" "$n" stepdown_reason)" == "view"*"itsservermadenoprogressfor5s"* ]] ||
			fail "node $n stepped down for another reason: $j"
		grep -q "stepping down from view [0-9]*: its server made no progress for 5 s" "$(data_dir "$n")/apus.log" ||
			fail "node $n's log does not say why it stepped down"
	done
	[ "$stepped" -ge 1 ] || fail "no new leader stepped down: $j; $(show_logs "$CONF" 20)"
	wait "${sleepers[@]}"
	run timeout 60 "$APUS" start --config "$CONF" --node "$lead" 3>&-
	assert_eq "$status" 0 "apus start --node $lead: $output"
	wait_digests_equal "$CONF" 60
	assert_eq "$(redis-cli -h "$(leader_host)" -p "$(leader_port)" GET stall:ctr)" 100 "the writes before the failover"
}

@test "a snapshot_cmd that fails shows in apus status: each node's recovery_point_error, and why the leader's writes wait" {
	OWN_CONF=$(APUS_TEST_METRICS=1 make_conf "$(test_dir own18640)" 18640 1M)
	sed -i "s|^snapshot_cmd .*|snapshot_cmd = /nonexistent/snapshot.sh|" "$OWN_CONF"
	CONF=$OWN_CONF
	start_cluster "$CONF"
	# The log fills: the writes that find no room wait (and time out here).
	timeout 60 redis-benchmark -h "$(leader_host)" -p "$(leader_port)" -t set -n 40000 -r 100000000 \
		-d 16 -c 20 -q >/dev/null 2>&1 &
	local writer=$! lead j w
	lead=$(leader_id)
	retry 150 0.2 eval '[[ "$(status_node "$(status_json)" "$lead" writes_waiting)" == "logfullsince"* ]]' ||
		fail "the leader does not say why writes wait: $(status_json)"
	# The raw JSON (status_json drops the spaces).
	j=$("$APUS" status --config "$CONF" --json 3>&-)
	w=$(grep -o '"writes_waiting":"[^"]*"' <<<"$j")
	[[ "$w" == *"writes wait for a recovery point"*"snapshot failed: snapshot_cmd exited with 127 at"* ]] ||
		fail "writes_waiting does not name the failing snapshot_cmd: $w"
	assert_eq "$(grep -o '"recovery_point_error":"snapshot failed: snapshot_cmd exited with 127"' <<<"$j" | wc -l)" \
		3 "nodes showing the snapshot failure ($j)"
	run "$APUS" status --config "$CONF" 3>&-
	[[ "$output" == *"writes wait: log full since"* ]] || fail "the text status does not say why writes wait: $output"
	metrics=$(curl -s "http://$(node_host "$lead"):$(conf_node_get "$CONF" "$lead" metrics_port)/metrics")
	grep -Eq '^apus_log_full_seconds\{[^}]*\} [1-9]' <<<"$metrics" || fail "no apus_log_full_seconds > 0: $metrics"
	grep -Eq '^apus_snapshot_failures\{[^}]*\} [1-9]' <<<"$metrics" || fail "no apus_snapshot_failures > 0"
	kill "$writer" 2>/dev/null || true
	wait "$writer" || true
}
