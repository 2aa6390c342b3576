#!/usr/bin/env bats
# Durability past the log's end: a 1 MB log that wraps many times, then
# whole-cluster restarts (apus stop/start, kill -9 of all), chains of
# kill -9 and restart of one node at a time, and nodes whose snapshots no
# longer reach their log.  Every write acknowledged before must be there
# after: the replicas' DEBUG DIGEST equals the one before, and the list
# audit (build/bench/listaudit) finds every acknowledged element at its
# position.

load helpers


setup_file() {
	file_cluster 18300 1M
}

# all_recoverable - every node runs, can rebuild its state, and has a
# recovery point (a snapshot) already.
function all_recoverable() {
	local j n
	j=$(status_json) || return 1
	for n in $(conf_nodes "$CONF"); do
		[ "$(status_node "$j" "$n" recoverable)" = true ] || return 1
		[ "$(status_node "$j" "$n" snapshot_index)" -gt 0 ] 2>/dev/null || return 1
	done
}

# view_of JSON - the cluster's view.
function view_of() { grep -o '"view":[0-9]*' <<<"$1" | head -n 1 | cut -d: -f2; }

# same_state DIGEST KEYS - every replica holds DIGEST with KEYS keys.
function same_state() {
	local n d k
	wait_digests_equal "$CONF" 60 || return 1
	while read -r n d k; do
		[ "$d" = "$1" ] && [ "$k" = "$2" ] || {
			echo "node $n: digest $d ($k keys), before the restart $1 ($2 keys)" >&2
			return 1
		}
	done < <(digests "$CONF")
}

# fill N - N SETs of random keys: ~N x 90 bytes of log (a 1 MB log wraps
# about N / 11,000 times).
function fill() {
	bench -t set -n "$1" -r 100000000 -d 16 -c 20 -q
}

@test "the log wraps 4 times; every node keeps a recovery point and the leader never waits for one" {
	fill 50000
	retry 100 0.2 all_recoverable || fail "no recovery point on every node: $(status_json)"
	local j n
	j=$(status_json)
	for n in $(conf_nodes "$CONF"); do
		[ "$(status_node "$j" "$n" snapshots)" -gt 1 ] ||
			fail "node $n took fewer than 2 snapshots of itself: $j"
	done
	wait_digests_equal "$CONF" 60
}

@test "apus stop + apus start of the whole cluster after the log wrapped: same state, one election, prompt stop" {
	fill 15000
	wait_digests_equal "$CONF" 60
	local before keys view t0 pids=() n
	read -r _ before keys < <(digests "$CONF" | head -n 1)
	view=$(view_of "$(status_json)")
	for n in $(conf_nodes "$CONF"); do pids+=("$(redis_pid "$n")"); done
	t0=$SECONDS
	run timeout 60 "$APUS" stop --config "$CONF" 3>&-
	assert_eq "$status" 0 "apus stop"
	[[ "$output" != *"ignored SIGTERM"* ]] || fail "a node ignored SIGTERM: $output"
	[ $((SECONDS - t0)) -le 5 ] || fail "apus stop took $((SECONDS - t0)) s"
	wait_pids_gone 5 "${pids[@]}" || fail "processes left: ${pids[*]}"
	start_cluster "$CONF"
	same_state "$before" "$keys"
	local after
	after=$(view_of "$(status_json)")
	[ "$after" -le $((view + 2)) ] || fail "view $view -> $after: more than one election after the restart"
}

@test "kill -9 of all three after the log wrapped, then apus start: same state" {
	fill 15000
	wait_digests_equal "$CONF" 60
	local before keys n
	read -r _ before keys < <(digests "$CONF" | head -n 1)
	for n in $(conf_nodes "$CONF"); do kill -KILL "$(redis_pid "$n")"; done
	sleep 0.5
	start_cluster "$CONF"
	same_state "$before" "$keys"
}

@test "kill -9 of the leader, then the new leader, then the third, each restarted, under a list writer: no acknowledged write lost" {
	local n round
	start_writer chain 120
	for round in 1 2 3; do
		writer_more chain 2000
		n=$(leader_id) || fail "round $round: no leader"
		kill -KILL "$(redis_pid "$n")"
		sleep 1
		run timeout 60 "$APUS" start --config "$CONF" --node "$n" 3>&-
		assert_eq "$status" 0 "round $round: apus start --node $n: $output"
	done
	writer_more chain 2000
	end_writer
	audit chain 1
}

@test "nodes whose snapshots no longer reach their log never elect each other; the one that can leads, the others are rebuilt" {
	fill 30000
	wait_digests_equal "$CONF" 60
	local before keys n j able bs unable=()
	read -r _ before keys < <(digests "$CONF" | head -n 1)
	# The one that keeps its recovery point is the leader, stopped last so
	# that its log stays the newest: stopped first, the others would elect
	# one of them (a NOOP of a newer view), and a node with an older log
	# rightly wins no vote from them: nobody could lead.
	able=$(leader_id)
	[ -n "$able" ] || fail "no leader before the stop: $(status_json)"
	bs=$(all_backups) || fail "not every other node is a backup: $(status_json)"
	for n in $bs; do
		timeout 60 "$APUS" stop --config "$CONF" --node "$n" >/dev/null 3>&-
	done
	stop_cluster "$CONF"
	# Two nodes lose their recovery points: with a log that wrapped, their
	# servers can no longer be rebuilt from what they hold.
	for n in $(conf_nodes "$CONF"); do
		[ "$n" = "$able" ] && continue
		unable+=("$n")
		rm -f "$(data_dir "$n")/apus.snapshot" "$(data_dir "$n")/apus.seed"
	done
	for n in "${unable[@]}"; do
		run timeout 60 "$APUS" start --config "$CONF" --node "$n" 3>&-
		assert_eq "$status" 0 "apus start --node $n: $output"
	done
	sleep 3
	j=$("$APUS" status --config "$CONF" --json 3>&-)
	grep -q '"leader":null' <<<"$j" || fail "nodes that cannot rebuild their state elected one: $j"
	grep -q '"no_leader_reason":"no running node can rebuild its state' <<<"$j" ||
		fail "status does not say why there is no leader: $j"
	for n in "${unable[@]}"; do
		[ "$(status_node "$j" "$n" recoverable)" = false ] || fail "node $n claims it can rebuild: $j"
	done
	run timeout 60 "$APUS" start --config "$CONF" --node "$able" 3>&-
	assert_eq "$status" 0 "apus start --node $able: $output"
	retry 100 0.2 leader_port "$CONF" || fail "no leader with node $able back: $(status_json)"
	assert_eq "$(leader_id)" "$able" "the leader"
	for n in "${unable[@]}"; do
		run timeout 60 "$APUS" stop --config "$CONF" --node "$n" 3>&-
		run timeout 120 "$APUS" rebuild --config "$CONF" --node "$n" 3>&-
		assert_eq "$status" 0 "apus rebuild --node $n: $output"
	done
	same_state "$before" "$keys"
}

# make test-full's (and make soak's, with every shipped server): a paused
# leader (failover.bats) and kills under a writer with the log wrapping
# (above) are make test's.
# bats test_tags=soak
@test "list audit under SIGSTOP of the leader and of a backup and kill -9 of a backup, the log wrapping: no acknowledged write lost" {
	local n p
	start_writer faults 120
	writer_more faults 4000
	# A paused leader is deposed; resumed, it rebuilds and rejoins.
	n=$(leader_id) || fail "no leader"
	p=$(redis_pid "$n")
	kill -STOP "$p"
	sleep 2
	kill -CONT "$p"
	writer_more faults 4000
	# A paused backup holds the log: the others go on once it is back.
	n=$(backups | head -n 1)
	p=$(redis_pid "$n")
	kill -STOP "$p"
	sleep 1
	kill -CONT "$p"
	writer_more faults 4000
	n=$(backups | tail -n 1)
	kill -KILL "$(redis_pid "$n")"
	sleep 1
	run timeout 60 "$APUS" start --config "$CONF" --node "$n" 3>&-
	assert_eq "$status" 0 "apus start --node $n: $output"
	writer_more faults 4000
	end_writer
	audit faults 1000
}

# A recovery point is the server's data, not its read buffers: a leader's
# BGSAVE forked while its server held the first part of a SET would hold
# neither, and the leader restarting from it would replay the rest alone
# and lose the SET (doc/limits.md).  Which clients the fork may cut is
# told by what the server does next with them (preload/point_watch.c);
# the backups' side is in memcached.bats.
@test "a leader's recovery point never cuts a request read in part: the leader restarted from its point holds a SET sent in two parts" {
	local lead dir go out try err key seen=
	lead=$(leader_id)
	dir=$(data_dir "$lead")
	for try in 1 2 3; do
		key=cut$try go="$BATS_TEST_TMPDIR/go$try" out="$BATS_TEST_TMPDIR/out$try"
		# The first part of a SET, then the rest once told to.
		timeout 60 python3 -c '
import os, socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
k = sys.argv[5].encode()
s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$10\r\n12345" % (len(k), k))
open(sys.argv[4], "w").write("half\n")
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
s.sendall(b"67890\r\n")
open(sys.argv[4], "w").write(s.recv(100).decode())' "$(node_host "$lead")" "$(app_port "$lead")" "$go" "$out" "$key" 3>&- &
		retry 100 0.05 grep -q half "$out" || fail "the client did not send its first part"
		# The leader is asked for a point while its server holds the
		# first part: the fork must come within a second of that read
		# to be watched (a slower one is taken for a blocked request).
		touch "$dir/apus.snapshot.request"
		retry 40 0.05 eval 'err=$(status_node "$(status_json)" "$lead" recovery_point_error); [[ "$err" == *readinpart* ]]' &&
			seen=1
		touch "$go"
		retry 100 0.1 grep -q OK "$out" || fail "the SET was not answered: $(cat "$out")"
		wait
		[ -z "$seen" ] || break
	done
	[ -n "$seen" ] || fail "the leader's point was never refused: $(status_json)"
	# The leader stops; another leads; it comes back from its own point.
	run timeout 60 "$APUS" stop --config "$CONF" --node "$lead" 3>&-
	assert_eq "$status" 0 "apus stop --node $lead: $output"
	run timeout 120 "$APUS" start --config "$CONF" --node "$lead" 3>&-
	assert_eq "$status" 0 "apus start --node $lead: $output"
	retry 100 0.1 eval '[ "$(admin "$lead" GET "$key")" = 1234567890 ]' ||
		fail "node $lead after its restart holds $key = $(admin "$lead" GET "$key"); $(show_logs "$CONF" 10)"
	wait_digests_equal "$CONF" 60
}
