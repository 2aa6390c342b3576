#!/usr/bin/env bats
# apus verify: a read-only sweep sent through the leader, and every live
# backup's verdict on it from the output checker.  Equal replicas pass, a
# replica whose state differs is named, bad input is refused in one line,
# and a backup that is down, stopped or unseen counts as the exit status
# says (0 only when the live nodes agree and are a majority).

load helpers

setup_file() {
	have redis || return 0
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		have netns || return 0
	fi
	local debug=()
	# In namespaces neither verify's client nor the backups' replay
	# connections come from loopback: Redis must allow DEBUG from anyone.
	[ -n "${APUS_TEST_NETNS:-}" ] && debug=(64M --enable-debug-command yes)
	CONF=$(make_conf "$(test_dir cluster)" 20000 "${debug[@]}")
	export CONF
	# The default sweep: DEBUG DIGEST (apps/redis/verify.txt).
	sed -i "2i verify_cmd = $APUS_ROOT/apps/redis/verify.txt" "$CONF"
	start_cluster "$CONF"
}

verify() { timeout 120 "$APUS" verify --config "$CONF" "$@" 3>&-; }

# sweep NAME TEXT - a sweep file holding TEXT (printf escapes); its path.
sweep() {
	local f="$BATS_FILE_TMPDIR/$1.sweep"
	printf "$2" >"$f"
	echo "$f"
}

# node_line N - node N's line of the last run's output.
node_line() { grep "^node $1: " <<<"$output"; }

# verify_json_node JSON ID KEY - KEY of node ID in verify's JSON.
verify_json_node() { status_node "$(tr -d ' \t\r\n' <<<"$1")" "$2" "$3"; }

@test "after a write load every replica answers the sweep as the leader does" {
	local leader n d
	bench -t set,incr,lpush,sadd,hset -n 20000 -c 20 -r 10000 -q
	run verify
	[ "$status" -eq 0 ] || fail "apus verify exit $status: $output"
	leader=$(leader_id)
	[[ "$(node_line "$leader")" == "node $leader: leader, served the sweep: 43 bytes of reply"* ]] ||
		fail "leader's line: $output"
	for n in $(all_backups); do
		assert_eq "$(node_line "$n")" "node $n: equal" "node $n"
	done
	# What verify compared is the real digest of every replica's data.
	wait_digests_equal "$CONF" 30
	d=$(admin "$leader" DEBUG DIGEST)
	run verify --json
	[ "$status" -eq 0 ] || fail "apus verify --json exit $status: $output"
	assert_eq "$(json_field "$(strip_nodes "$output")" equal)" true "equal"
	assert_eq "$(json_field "$(strip_nodes "$output")" bytes)" 43 "bytes"
	assert_eq "$(json_field "$(strip_nodes "$output")" reply_head)" "+$d\\r\\n" "the digest verify got"
	for n in $(all_backups); do
		assert_eq "$(verify_json_node "$output" "$n" result)" equal "node $n in JSON"
	done
}

@test "a replica whose state differs is named, and verify exits 1" {
	local bs bad good f
	bs=$(all_backups) || fail "not every other node is a backup"
	bad=$(head -n 1 <<<"$bs")
	good=$(tail -n 1 <<<"$bs")
	# The admin socket is not replicated: only this replica has the key.
	assert_eq "$(admin "$bad" SET verify:only-here yes)" OK "SET on node $bad's admin socket"
	f=$(sweep get 'GET verify:only-here\r\n')
	run verify --cmd "$f"
	[ "$status" -eq 1 ] || fail "exit $status, want 1: $output"
	[[ "$(node_line "$bad")" == "node $bad: DIFFERS at byte "* ]] || fail "node $bad not named: $output"
	assert_eq "$(node_line "$good")" "node $good: equal" "node $good"
	# The default sweep (the whole data's digest) says so too.
	run verify --json
	[ "$status" -eq 1 ] || fail "DEBUG DIGEST: exit $status, want 1: $output"
	assert_eq "$(verify_json_node "$output" "$bad" result)" differs "node $bad in JSON: $output"
	assert_eq "$(verify_json_node "$output" "$good" result)" equal "node $good in JSON: $output"
	assert_eq "$(json_field "$(strip_nodes "$output")" equal)" false "equal"
	# Put back, the replicas agree again.
	admin "$bad" DEL verify:only-here >/dev/null
	run verify
	[ "$status" -eq 0 ] || fail "after the DEL: exit $status: $output"
}

@test "bad input: one line, exit 2" {
	local f bare
	for args in "--cmd /nonexistent/sweep" "--cmd $BATS_FILE_TMPDIR" "--cmd $(sweep empty '')" \
		"--timeout soon" "--node 1" "--bogus"; do
		# shellcheck disable=SC2086
		run verify $args
		[ "$status" -eq 2 ] || fail "$args: exit $status, want 2: $output"
		[ "${#lines[@]}" -eq 1 ] && [[ "${lines[0]}" == "apus: "* ]] || fail "$args: not one line: $output"
	done
	run env -u APUS_CONFIG "$APUS" verify 3>&-
	[ "$status" -eq 2 ] && [ "${#lines[@]}" -eq 1 ] || fail "no config: exit $status: $output"
	[[ "$output" == *"--config FILE is required"* ]] || fail "no config: $output"
	run "$APUS" verify --config /nonexistent/apus.conf 3>&-
	[ "$status" -eq 2 ] && [ "${#lines[@]}" -eq 1 ] || fail "missing config: exit $status: $output"
	# No --cmd and no verify_cmd in the config.
	bare="$BATS_FILE_TMPDIR/bare.conf"
	grep -v '^verify_cmd' "$CONF" >"$bare"
	run "$APUS" verify --config "$bare" 3>&-
	[ "$status" -eq 2 ] && [ "${#lines[@]}" -eq 1 ] || fail "no sweep: exit $status: $output"
	[[ "$output" == *"no sweep"* ]] || fail "no sweep: $output"
	run "$APUS" verify --help
	[ "$status" -eq 0 ] && [[ "$output" == *"--cmd SWEEP"* ]] || fail "--help: $output"
}

@test "verify finds its verdict while many short connections end" {
	local host port i pid
	host=$(leader_host)
	port=$(leader_port)
	# A connection per request: every backup ends thousands of checks a
	# second, far more than its ring of the last ones holds.
	timeout 60 redis-benchmark -h "$host" -p "$port" -t ping -n 1000000 -c 10 -k 0 -q >/dev/null 2>&1 3>&- &
	pid=$!
	sleep 1
	for i in 1 2 3; do
		run verify --timeout 20000
		[ "$status" -eq 0 ] || break
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	[ "$status" -eq 0 ] || fail "run $i under churn: exit $status: $output"
}

@test "a live backup that gives no verdict in time fails verify" {
	local b pid
	b=$(all_backups | tail -n 1) || fail "no backups"
	pid=$(redis_pid "$b")
	kill -STOP "$pid"
	run verify --timeout 2000
	kill -CONT "$pid"
	[ "$status" -eq 1 ] || fail "exit $status, want 1: $output"
	[[ "$(node_line "$b")" == "node $b: no result (behind: applied "* ]] || fail "node $b: $output"
	retry 20 0.5 verify
}

@test "nodes this host cannot see count as down: a lone leader is no majority" {
	local unseen leader n
	leader=$(leader_id)
	unseen="$BATS_FILE_TMPDIR/unseen.conf"
	# The same cluster, but the backups' data directories are elsewhere.
	awk -v l="$leader" '/^\[node/ { n = $2 + 0 } /^data_dir/ && n != l { $0 = "data_dir = /nonexistent/n" n } 1' \
		"$CONF" >"$unseen"
	run "$APUS" verify --config "$unseen" 3>&-
	[ "$status" -eq 1 ] || fail "exit $status, want 1: $output"
	for n in $(conf_nodes "$CONF"); do
		[ "$n" = "$leader" ] && continue
		assert_eq "$(node_line "$n")" "node $n: no result (down)" "node $n"
	done
}

@test "a down backup is reported; the live majority's agreement passes" {
	local b pid other
	b=$(all_backups | tail -n 1) || fail "no backups"
	other=$(all_backups | head -n 1)
	pid=$(redis_pid "$b")
	kill -KILL "$pid"
	wait_pids_gone 10 "$pid" || fail "node $b's server survived kill -9"
	run verify
	[ "$status" -eq 0 ] || fail "exit $status, want 0: $output"
	assert_eq "$(node_line "$b")" "node $b: no result (down)" "node $b"
	assert_eq "$(node_line "$other")" "node $other: equal" "node $other"
	run verify --json
	assert_eq "$(verify_json_node "$output" "$b" result)" down "node $b in JSON: $output"
}
