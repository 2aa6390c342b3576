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
# point_refused_then_restart WHO KEY VALUE FIRST ANSWERED REST REFUSAL - a
# client of the leader sends FIRST (\r\n written so; @KEY@ stands for KEY
# and the try's number), waits for the ANSWERED bytes back, and holds on
# while node WHO (leader or backup) is asked for a recovery point, which
# must be refused with an error matching REFUSAL (spaces stripped); then
# it sends REST.  That node, stopped and started from its own point, must
# hold each try's key = VALUE.
function point_refused_then_restart() {
	local who=$1 key=$2 value=$3 first=$4 answered=$5 rest=$6 refusal=$7
	local lead node dir go out try t err seen=
	lead=$(leader_id)
	node=$lead
	[ "$who" = leader ] || node=$(backups | head -n 1)
	dir=$(data_dir "$node")
	for try in 1 2 3; do
		go="$BATS_TEST_TMPDIR/go$try" out="$BATS_TEST_TMPDIR/out$try"
		timeout 60 /usr/bin/python3 -c '
import os, socket, sys, time
def raw(arg):
    return arg.encode().decode("unicode_escape").encode("latin1")
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(raw(sys.argv[5]))
want, got = raw(sys.argv[6]), b""
while len(got) < len(want):
    got += s.recv(100)
assert got == want, got
open(sys.argv[4], "w").write("half\n")
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
s.sendall(raw(sys.argv[7]))
open(sys.argv[4], "w").write(s.recv(100).decode())' "$(node_host "$lead")" "$(app_port "$lead")" \
			"$go" "$out" "${first//@KEY@/$key$try}" "$answered" "${rest//@KEY@/$key$try}" 3>&- &
		retry 100 0.05 grep -q half "$out" || fail "the client did not send its first part"
		touch "$dir/apus.snapshot.request"
		retry 40 0.05 eval 'err=$(status_node "$(status_json)" "$node" recovery_point_error); [[ "$err" == $refusal ]]' &&
			seen=1
		touch "$go"
		retry 100 0.1 grep -q OK "$out" || fail "the client was not answered: $(cat "$out")"
		wait
		[ -z "$seen" ] || break
	done
	# The ask stands through the refusal: a point follows once the
	# client is done, without another ask.  Up to 30 s: with 10 s, one
	# full run in five saw no point in time (why is not known; an ask
	# that was lost still fails here).
	local commit
	commit=$(status_node "$(status_json)" "$lead" commit)
	retry 300 0.1 eval '[ "$(status_node "$(status_json)" "$node" snapshot_index)" -ge "$commit" ]' ||
		fail "node $node took no point after the refused one (entry $commit): $(status_json)"
	# The node stops (another leads) and comes back from its own point.
	run timeout 60 "$APUS" stop --config "$CONF" --node "$node" 3>&-
	assert_eq "$status" 0 "apus stop --node $node: $output"
	run timeout 120 "$APUS" start --config "$CONF" --node "$node" 3>&-
	assert_eq "$status" 0 "apus start --node $node: $output"
	for t in $(seq "$try"); do
		retry 100 0.1 eval '[ "$(admin "$node" GET "$key$t")" = "$value" ]' ||
			fail "node $node after its restart holds $key$t = $(admin "$node" GET "$key$t"); $(show_logs "$CONF" 10)"
	done
	wait_digests_equal "$CONF" 60
	[ -n "$seen" ] || fail "node $node's point was never refused: $(status_json)"
}

@test "a leader's recovery point never cuts a request read in part: the leader restarted from its point holds a SET sent in two parts" {
	# The fork must come within a second of the read to be watched (a
	# slower one is taken for a blocked request): hence the tries.
	point_refused_then_restart leader cut 1234567890 '*3\r\n$3\r\nSET\r\n$4\r\n@KEY@\r\n$10\r\n12345' '' \
		'67890\r\n' '*readinpart*'
}

@test "a recovery point never cuts a pipelined request: Redis's own client list refuses it (snapshot.sh exits 75)" {
	# The server answered the first SET: apus's own check takes the
	# client for answered; only Redis knows it holds half the next one.
	point_refused_then_restart leader pipe 1234567890 'SET pre 1\r\n*3\r\n$3\r\nSET\r\n$5\r\n@KEY@\r\n$10\r\n12345' \
		'+OK\r\n' '67890\r\n' '*exited75*'
}

@test "a recovery point never cuts a transaction: a MULTI whose EXEC is to come refuses it" {
	point_refused_then_restart leader multi queued 'MULTI\r\nSET @KEY@ queued\r\n' '+OK\r\n+QUEUED\r\n' \
		'EXEC\r\n' '*exited75*'
}

@test "a backup's recovery point never cuts a transaction either" {
	point_refused_then_restart backup bmulti queued 'MULTI\r\nSET @KEY@ queued\r\n' '+OK\r\n+QUEUED\r\n' \
		'EXEC\r\n' '*exited75*'
}

@test "a client left inside MULTI does not hold the log full: points are taken after 5 s of refusals, with a warning" {
	local lead out="$BATS_TEST_TMPDIR/multi"
	lead=$(leader_id)
	timeout 420 /usr/bin/python3 -c '
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"MULTI\r\n")
assert s.recv(100) == b"+OK\r\n"
open(sys.argv[3], "w").write("in\n")
time.sleep(400)' "$(node_host "$lead")" "$(app_port "$lead")" "$out" 3>&- &
	local client=$!
	retry 100 0.05 grep -q in "$out" || fail "the client did not enter MULTI"
	# ~2 MB: the 1 MB log wraps twice, so points must be taken meanwhile,
	# while the client is still inside MULTI (its session ends only when
	# it is killed below).
	local t0=$SECONDS
	fill 20000 || fail "the writes while a client stays in MULTI failed"
	kill -0 "$client" 2>/dev/null || fail "the client left MULTI before the writes ended ($((SECONDS - t0)) s)"
	grep -q "refused for 5 s in a row" "$(data_dir "$lead")/apus.log" ||
		fail "no give-up was logged: $(show_logs "$CONF" 10)"
	kill "$client" 2>/dev/null || true
	wait
	wait_digests_equal "$CONF" 60
}

# all_points_past IDX - every node has a recovery point at entry IDX or later.
function all_points_past() {
	local n j
	j=$(status_json) || return 1
	for n in $(conf_nodes "$CONF"); do
		[ "$(status_node "$j" "$n" snapshot_index)" -ge "$1" ] || return 1
	done
}

# points_past IDX - every node is asked for a recovery point, and has one
# at entry IDX or later.
function points_past() {
	local n
	for n in $(conf_nodes "$CONF"); do touch "$(data_dir "$n")/apus.snapshot.request"; done
	retry 100 0.1 all_points_past "$1"
}

@test "a client's SELECTed database is carried by recovery points: after kill -9 of all, its later writes are in its database" {
	local lead go="$BATS_TEST_TMPDIR/go" out="$BATS_TEST_TMPDIR/out" commit n pids=()
	lead=$(leader_id)
	timeout 120 /usr/bin/python3 -c '
import os, socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def ask(req, want):
    s.sendall(req)
    got = b""
    while len(got) < len(want):
        got += s.recv(100)
    assert got == want, got
ask(b"SELECT 7\r\nSET sel:1 a\r\n", b"+OK\r\n+OK\r\n")
open(sys.argv[4], "w").write("selected\n")
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
ask(b"SET sel:2 b\r\n", b"+OK\r\n")
open(sys.argv[4], "w").write("done\n")
time.sleep(100)' "$(node_host "$lead")" "$(app_port "$lead")" "$go" "$out" 3>&- &
	retry 100 0.05 grep -q selected "$out" || fail "the client did not SELECT"
	commit=$(status_node "$(status_json)" "$lead" commit)
	points_past "$commit" || fail "no recovery point at entry $commit or later on every node: $(status_json)"
	touch "$go"
	retry 100 0.05 grep -q done "$out" || fail "the second SET was not answered"
	for n in $(conf_nodes "$CONF"); do pids+=("$(redis_pid "$n")"); done
	kill -KILL "${pids[@]}"
	kill %1 2>/dev/null || true
	wait
	wait_pids_gone 5 "${pids[@]}" || fail "processes left: ${pids[*]}"
	start_cluster "$CONF"
	for n in $(conf_nodes "$CONF"); do
		retry 100 0.1 eval '[ "$(admin "$n" -n 7 GET sel:2)" = b ]' ||
			fail "node $n: db 7 holds sel:2 = '$(admin "$n" -n 7 GET sel:2)', db 0 '$(admin "$n" GET sel:2)'"
	done
	wait_digests_equal "$CONF" 60
}
