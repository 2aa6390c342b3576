#!/usr/bin/env bats
# One owner per node (issue 19): apus restore and the node's guard never
# act on a node at once, whichever comes first; the other says what
# happened in one line (exit 3 for the CLI).  apus stop stops every process
# of a node, CRIU-restored ones and ones apus did not record included, and
# apus start works right after.  One guard per node.  apus guard --service
# starts its node and stops it on SIGTERM.  Nothing of a deleted data dir
# or of a process that died creating its region is left in region_dir.

load helpers

function setup_file() {
	have root && command -v criu >/dev/null 2>&1 || return 0
	have redis || return 0
	local dir
	dir=$(test_dir owner)
	# A guard per node, checkpointing each backup every 3 s (every second,
	# two guards' dumps took most of two cores from the tests' own work).
	CONF=$(APUS_TEST_GUARD=on make_conf "$dir" 19200)
	sed -i 's/^guard .*/&\ncheckpoint_interval_s = 3/' "$CONF"
	export CONF
	start_cluster "$CONF"
}

function setup() {
	requires redis
	command -v criu >/dev/null 2>&1 || skip "CRIU not installed (scripts/install-criu.sh builds one)"
	have root || skip "CRIU needs root"
}

function teardown_file() {
	[ -n "${CONF:-}" ] && stop_cluster "$CONF"
	return 0
}

# node_procs NODE - the pids that have NODE's server lock open: its server
# (whoever started or restored it) and what the server forked.
function node_procs() {
	local lock
	lock="$(data_dir "$1")/apus.lock"
	# One find, not a readlink per descriptor of the machine: a subshell
	# each cost this file a minute.
	find /proc/[0-9]*/fd -lname "$lock" 2>/dev/null | cut -d/ -f3 | sort -u
}

# node_servers NODE - how many of NODE's processes are servers (their
# parent is not one of them).
function node_servers() {
	local procs p n=0
	procs=$(node_procs "$1")
	for p in $procs; do
		grep -qx "$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)" <<<"$procs" || n=$((n + 1))
	done
	echo "$n"
}

# wait_checkpoint NODE - until NODE's guard has taken a checkpoint.
function wait_checkpoint() {
	local log
	log="$(data_dir "$1")/apus.guard.log"
	retry 150 0.1 grep -q "^.*checkpoint [0-9]" "$log" || fail "no checkpoint of node $1: $(tail -n 5 "$log")"
}

# holder NODE - who holds NODE's owner lock (the lock file's text).
function holder() { cat "$(data_dir "$1")/apus.owner.lock" 2>/dev/null; }

# node_back NODE - NODE runs, exactly one server, and its guard still runs.
function node_back() {
	local n=$1 pid
	retry 150 0.1 redis-cli -s "$(admin_sock "$n")" PING >/dev/null || fail "node $n did not come back"
	pid=$(redis_pid "$n")
	[ -n "$pid" ] && kill -0 "$pid" || fail "node $n's pid file names no live process"
	assert_eq "$(node_servers "$n")" 1 "servers of node $n"
}

# stop_and_check_clean NODE - apus stop --node NODE leaves no process of it;
# apus start --node NODE then starts it again.
function stop_and_check_clean() {
	local n=$1
	run "$APUS" stop --config "$CONF" --node "$n" 3>&-
	[ "$status" -eq 0 ] || fail "apus stop failed ($status): $output"
	[ -z "$(node_procs "$n")" ] || fail "processes of node $n survived apus stop: $(node_procs "$n" | xargs ps -o pid,ppid,args -p)"
	! pgrep -f "apus guard --config $(realpath "$CONF") --node $n\$" >/dev/null || fail "node $n's guard survived apus stop"
	run "$APUS" start --config "$CONF" --node "$n" 3>&-
	[ "$status" -eq 0 ] || fail "apus start after apus stop failed ($status): $output"
	node_back "$n"
}

@test "apus restore while the guard restores the node: the guard acts, apus restore says so and exits 3" {
	local victim log
	victim=$(backups | tail -n 1)
	[ -n "$victim" ] || fail "no backup"
	wait_checkpoint "$victim"
	log="$(data_dir "$victim")/apus.guard.log"
	local mark
	mark=$(wc -l <"$log")
	kill -KILL "$(redis_pid "$victim")"
	# The guard takes the node's lock for its restore (or is done with it
	# already); apus restore, after that, finds the guard acting.
	retry 200 0.05 eval 'grep -q "apus guard" <<<"$(holder "$victim")" ||
		tail -n +"$((mark + 1))" "$log" | grep -q "restored from checkpoint\|starting it afresh"' ||
		fail "the guard did not act on node $victim's death in 10 s: $(tail -n 5 "$log")"
	run "$APUS" restore --config "$CONF" --node "$victim" 3>&-
	echo "apus restore: $output" >&2
	[ "$status" -eq 3 ] || fail "apus restore exited $status, want 3: $output"
	[[ "$output" == *"node $victim is running"* ]] || fail "unclear message: $output"
	grep -q "restored from checkpoint\|starting it afresh" "$log" || fail "the guard did not bring it back: $(tail -n 5 "$log")"
	node_back "$victim"
	stop_and_check_clean "$victim"
}

@test "apus restore first: the guard stands aside, and apus stop stops the CRIU-restored server (parent init)" {
	local victim gpid log rpid restore_pid rc=0
	victim=$(backups | tail -n 1)
	wait_checkpoint "$victim"
	log="$(data_dir "$victim")/apus.guard.log"
	gpid=$(cat "$(data_dir "$victim")/apus.guard.pid")
	# The guard is frozen (between two of its checkpoints: not holding the
	# node's lock) while the server dies and apus restore takes the lock.
	local i
	for ((i = 0; i < 50; i++)); do
		kill -STOP "$gpid"
		[ -z "$(holder "$victim")" ] && break
		kill -CONT "$gpid"
		sleep 0.05
	done
	[ -z "$(holder "$victim")" ] || fail "the guard always held node $victim's lock: $(holder "$victim")"
	# apus restore's criu waits for the test's go: the restore holds the
	# node's lock until then, however fast the machine.
	local go="$BATS_TEST_TMPDIR/go" criu_wait="$BATS_TEST_TMPDIR/criu"
	printf '#!/bin/sh\n[ "$1" = restore ] && while [ ! -e %s ]; do sleep 0.05; done\nexec %s "$@"\n' \
		"$go" "$(command -v criu)" >"$criu_wait"
	chmod +x "$criu_wait"
	local victim_pid
	victim_pid=$(redis_pid "$victim")
	kill -KILL "$victim_pid"
	# Dead (a zombie: its frozen guard reaps nothing) before apus restore
	# looks, or it finds the node running: SIGKILL takes a moment.
	retry 200 0.05 bash -c "! [ -e /proc/$victim_pid ] || grep -q '^State:[[:space:]]*[ZX]' /proc/$victim_pid/status" ||
		{ kill -CONT "$gpid"; fail "node $victim's server (pid $victim_pid) outlived SIGKILL"; }
	APUS_CRIU=$criu_wait "$APUS" restore --config "$CONF" --node "$victim" >"$BATS_TEST_TMPDIR/restore.out" 2>&1 3>&- &
	restore_pid=$!
	retry 200 0.05 eval 'grep -q "apus restore" <<<"$(holder "$victim")"' || {
		kill -CONT "$gpid"
		touch "$go"
		fail "apus restore never held the lock: $(cat "$BATS_TEST_TMPDIR/restore.out")"
	}
	# While it holds it, apus status says who acts, and the guard, woken,
	# finds the node dead and the lock taken: it stands aside.
	local before
	before=$(wc -l <"$log")
	run "$APUS" status --config "$CONF" --node "$victim" --json 3>&-
	[[ "$output" == *"\"acting\":\"apus restore (pid $restore_pid)\""* ]] ||
		{ kill -CONT "$gpid"; touch "$go"; fail "apus status does not say who acts: $output"; }
	kill -CONT "$gpid"
	retry 100 0.05 grep -q "standing aside: apus restore (pid $restore_pid) acts on node $victim" "$log" ||
		{ touch "$go"; fail "the guard did not stand aside: $(tail -n 3 "$log")"; }
	touch "$go"
	wait "$restore_pid" || rc=$?
	[ "$rc" -eq 0 ] || fail "apus restore failed ($rc): $(cat "$BATS_TEST_TMPDIR/restore.out")"
	node_back "$victim"
	sleep 1
	! tail -n +"$((before + 1))" "$log" | grep -q "restored from checkpoint\|starting it afresh\|died 5 times" ||
		fail "the guard acted too: $(tail -n +"$((before + 1))" "$log")"
	rpid=$(redis_pid "$victim")
	assert_eq "$(awk '{print $4}' "/proc/$rpid/stat")" 1 "the CLI-restored server's parent"
	stop_and_check_clean "$victim"
}

@test "apus stop stops a server apus did not record; apus start adopts one" {
	local victim pid
	victim=$(backups | tail -n 1)
	pid=$(redis_pid "$victim")
	# Without its guard (which would record the server again by itself).
	kill -TERM "$(cat "$(data_dir "$victim")/apus.guard.pid")"
	retry 100 0.05 test ! -e "$(data_dir "$victim")/apus.guard.pid" || fail "the guard did not stop"
	rm "$(data_dir "$victim")/apus.pid"
	run "$APUS" start --config "$CONF" --node "$victim" 3>&-
	[ "$status" -eq 0 ] || fail "apus start failed ($status): $output"
	[[ "$output" == *"already running (pid $pid, which apus had not recorded"* ]] || fail "not adopted: $output"
	assert_eq "$(redis_pid "$victim")" "$pid" "the recorded pid"
	rm "$(data_dir "$victim")/apus.pid"
	stop_and_check_clean "$victim"
}

@test "a second guard for a node exits 3 and says which guard runs" {
	local n gpid
	n=$(leader_id)
	gpid=$(cat "$(data_dir "$n")/apus.guard.pid")
	run "$APUS" guard --config "$CONF" --node "$n" 3>&-
	[ "$status" -eq 3 ] || fail "a second guard exited $status: $output"
	[[ "$output" == *"already has a guard"*"pid $gpid"* ]] || fail "unclear: $output"
}

@test "apus guard --service starts its node, and stops every process of it on SIGTERM" {
	local victim gpid rc=0
	victim=$(backups | tail -n 1)
	"$APUS" stop --config "$CONF" --node "$victim" >/dev/null 3>&-
	[ -z "$(node_procs "$victim")" ] || fail "node $victim still runs"
	"$APUS" guard --config "$CONF" --node "$victim" --service >"$BATS_TEST_TMPDIR/service.out" 2>&1 3>&- &
	gpid=$!
	retry 150 0.1 redis-cli -s "$(admin_sock "$victim")" PING >/dev/null ||
		fail "the service did not start node $victim: $(cat "$BATS_TEST_TMPDIR/service.out")"
	[ -n "$(node_procs "$victim")" ] || fail "no process of node $victim"
	kill -TERM "$gpid"
	wait "$gpid" || rc=$?
	[ "$rc" -eq 0 ] || fail "the service exited $rc: $(cat "$BATS_TEST_TMPDIR/service.out")"
	[ -z "$(node_procs "$victim")" ] || fail "processes of node $victim survived the service's stop"
	grep -q "node $victim stopped" "$BATS_TEST_TMPDIR/service.out" || fail "no stop line: $(cat "$BATS_TEST_TMPDIR/service.out")"
	run "$APUS" start --config "$CONF" --node "$victim" 3>&-
	[ "$status" -eq 0 ] || fail "apus start failed ($status): $output"
	node_back "$victim"
}

@test "region_dir keeps nothing of a deleted data dir nor of a process that died creating a region" {
	local dir conf other target dead_tmp live_tmp n
	n=$(backups | tail -n 1)
	# A second, throwaway cluster whose data dirs are then deleted.
	dir=$(test_dir owner-gone)
	conf=$(APUS_TEST_SNAPSHOTS=off make_conf "$dir" 19250)
	start_cluster "$conf"
	target=$(readlink "$dir/n1/apus.region")
	[ -f "$target" ] || fail "no region file for the second cluster: $target"
	stop_cluster "$conf"
	rm -rf "$dir"
	# What a process that died between creating and renaming leaves.
	other=$(readlink "$(data_dir "$n")/apus.region")
	dead_tmp="$other.4194000.tmp"
	live_tmp="$other.$$.tmp"
	: >"$dead_tmp"
	: >"$live_tmp"
	"$APUS" stop --config "$CONF" --node "$n" >/dev/null 3>&-
	[ ! -e "$target" ] || fail "the region of a deleted data dir survived apus stop: $target"
	[ ! -e "$dead_tmp" ] || fail "a dead process's temporary region survived"
	[ -e "$live_tmp" ] || fail "a live process's temporary region was removed"
	[ -e "$other" ] || fail "the stopped node's own region was removed"
	rm -f "$live_tmp"
	run "$APUS" start --config "$CONF" --node "$n" 3>&-
	[ "$status" -eq 0 ] || fail "apus start failed ($status): $output"
}
