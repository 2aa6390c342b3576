#!/usr/bin/env bats
# The config parser: every error names the file and the line in one line,
# and nothing is started; the CLI documents itself.

load helpers

setup() {
	need_apus
	DIR=$(test_dir "t$BATS_TEST_NUMBER")
	# A valid config, edited by each test into a bad one.
	GOOD=$(make_conf "$DIR" 17100)
	BAD="$DIR/bad.conf"
	cp "$GOOD" "$BAD"
}

teardown() {
	# A broken parser might have started something: never leave it running.
	stop_cluster "$BAD"
}

# line_of REGEX - the number of the first line of $BAD matching REGEX.
function line_of() {
	local l
	l=$(grep -n -m1 -E "$1" "$BAD" | cut -d: -f1)
	[ -n "$l" ] || fail "BUG: '$1' not in $BAD"
	echo "$l"
}

# expect_conf_error LINE PATTERN - apus start and apus status refuse $BAD
# with exactly one line 'apus: $BAD:LINE: ...' containing PATTERN
# (LINE may be a regex).
function expect_conf_error() {
	local line=$1 pattern=$2 cmd n
	for cmd in start status; do
		run timeout 30 "$APUS" "$cmd" --config "$BAD" 3>&-
		[ "$status" -ne 0 ] || fail "apus $cmd accepted a bad config; output: $output"
		[ "$status" -ne 124 ] || fail "apus $cmd hung on a bad config"
		[ "${#lines[@]}" -eq 1 ] || fail "apus $cmd: want one line, got ${#lines[@]}: $output"
		[[ "$output" =~ ^apus:\ "$BAD":($line):\  ]] ||
			fail "apus $cmd: want 'apus: $BAD:$line: ...', got: $output"
		grep -qiE -- "$pattern" <<<"$output" ||
			fail "apus $cmd: message does not mention '$pattern': $output"
	done
	for n in $(conf_nodes "$BAD"); do
		[ ! -e "$(data_dir "$n" "$BAD")/apus.pid" ] || fail "node $n was started from a bad config"
	done
}

@test "the unchanged config parses" {
	# Guards the tests below: their errors must come from the edit alone.
	run timeout 30 "$APUS" status --config "$GOOD" 3>&-
	[ "$status" -eq 0 ] || fail "apus status of the unchanged config exited $status: $output"
	[[ ! "$output" =~ $GOOD:[0-9]+: ]] || fail "valid config rejected: $output"
}

@test "unknown key" {
	sed -i '3i foo = 1' "$BAD"
	expect_conf_error "$(line_of '^foo = ')" "foo"
}

@test "unknown key in a node section" {
	echo "colour = blue" >>"$BAD"
	expect_conf_error "$(line_of '^colour = ')" "colour"
}

@test "line without '='" {
	sed -i '4i this is not a setting' "$BAD"
	expect_conf_error 4 "."
}

@test "bad number: log_size with an unknown suffix" {
	sed -i 's/^log_size .*/log_size = 12Q/' "$BAD"
	expect_conf_error "$(line_of '^log_size = ')" "log_size|12Q"
}

@test "bad number: heartbeat_ms not a number" {
	sed -i 's/^heartbeat_ms .*/heartbeat_ms = ten/' "$BAD"
	expect_conf_error "$(line_of '^heartbeat_ms = ')" "heartbeat_ms|ten"
}

@test "bad number: app_port out of range" {
	sed -i '0,/^app_port .*/s//app_port = 70000/' "$BAD"
	expect_conf_error "$(line_of '^app_port = 70000')" "app_port|70000"
}

@test "bad node id" {
	sed -i 's/^\[node 1\]/[node one]/' "$BAD"
	expect_conf_error "$(line_of '^\[node one\]')" "node"
}

@test "missing node section" {
	sed -i '/^\[node /,$d' "$BAD"
	# There is no line to blame: accept the file alone or with any line.
	local cmd
	for cmd in start status; do
		run timeout 30 "$APUS" "$cmd" --config "$BAD" 3>&-
		[ "$status" -ne 0 ] || fail "apus $cmd accepted a config without nodes"
		[ "${#lines[@]}" -eq 1 ] || fail "apus $cmd: want one line, got: $output"
		[[ "$output" =~ ^apus:\ "$BAD":([0-9]+:)?\ .*node ]] ||
			fail "apus $cmd: want 'apus: $BAD:[LINE:] ... node ...', got: $output"
	done
}

@test "node section without app_port" {
	sed -i '0,/^app_port /{/^app_port /d}' "$BAD"
	# Blame the section's header or its end; either names the node.
	run timeout 30 "$APUS" start --config "$BAD" 3>&-
	[ "$status" -ne 0 ] || fail "apus start accepted a node without app_port"
	[ "${#lines[@]}" -eq 1 ] || fail "want one line, got: $output"
	[[ "$output" =~ ^apus:\ "$BAD":[0-9]+:\ .*app_port ]] ||
		fail "want 'apus: $BAD:LINE: ... app_port ...', got: $output"
}

@test "duplicate node id" {
	printf '\n[node 1]\naddress  = 127.0.0.1\napp_port = 17199\ndata_dir = %s/dup\n' "$DIR" >>"$BAD"
	local second
	second=$(grep -n '^\[node 1\]' "$BAD" | sed -n 2p | cut -d: -f1)
	expect_conf_error "$second" "node|1|duplicate"
}

@test "bad transport name" {
	sed -i 's/^transport .*/transport = pigeon/' "$BAD"
	expect_conf_error "$(line_of '^transport = ')" "pigeon"
}

@test "bad fsync mode" {
	sed -i 's/^fsync .*/fsync = sometimes/' "$BAD"
	expect_conf_error "$(line_of '^fsync = ')" "sometimes|fsync"
}

@test "bad snapshot_leader value" {
	sed -i '3i snapshot_leader = sometimes' "$BAD"
	expect_conf_error 3 "snapshot_leader.*sometimes"
}

@test "snapshot_load_cmd without snapshot_cmd is refused, saying what it needs" {
	sed -i -e '/^snapshot_/d' -e '3i snapshot_load_cmd = true' "$BAD"
	run timeout 30 "$APUS" status --config "$BAD" 3>&-
	[ "$status" -ne 0 ] || fail "apus status accepted snapshot_load_cmd alone: $output"
	[[ "$output" == *"snapshot_load_cmd needs snapshot_cmd"* ]] || fail "unclear error: $output"
}

@test "bad snapshot_connections value, and none with a leader that snapshots, are refused" {
	sed -i '3i snapshot_connections = few' "$BAD"
	expect_conf_error 3 "snapshot_connections.*few"
	sed -i -e '3d' -e '/^snapshot_leader/d' "$BAD"
	sed -i '3i snapshot_connections = none' "$BAD"
	run timeout 30 "$APUS" status --config "$BAD" 3>&-
	[ "$status" -ne 0 ] || fail "apus status accepted snapshot_connections = none with snapshot_leader on: $output"
	[[ "$output" == *"snapshot_connections = none needs snapshot_leader = off"* ]] || fail "unclear error: $output"
}

@test "bad randomness, seed_function and seed_every values are refused; seed_function needs randomness = log" {
	sed -i '3i randomness = dice' "$BAD"
	expect_conf_error 3 "randomness.*dice"
	sed -i '3d' "$BAD"
	sed -i '3i seed_function = init genrand' "$BAD"
	expect_conf_error 3 "seed_function.*not a C function name"
	sed -i '3d' "$BAD"
	sed -i '3i seed_every = 0' "$BAD"
	expect_conf_error 3 "seed_every"
	sed -i '3d' "$BAD"
	sed -i -e '3i randomness = machine' -e '3i seed_function = init_genrand64' "$BAD"
	run timeout 30 "$APUS" status --config "$BAD" 3>&-
	[ "$status" -ne 0 ] || fail "apus status accepted seed_function with randomness = machine: $output"
	[[ "$output" == *"seed_function needs randomness = log"* ]] || fail "unclear error: $output"
}

@test "a config that does not exist is named" {
	run timeout 30 "$APUS" start --config "$DIR/nope.conf" 3>&-
	[ "$status" -ne 0 ] || fail "apus start accepted a missing config"
	[ "${#lines[@]}" -eq 1 ] || fail "want one line, got: $output"
	[[ "$output" == apus:*"$DIR/nope.conf"* ]] || fail "file not named: $output"
}

@test "start --node with an id not in the config" {
	run timeout 30 "$APUS" start --config "$GOOD" --node 9 3>&-
	[ "$status" -ne 0 ] || fail "apus start accepted --node 9"
	[ "${#lines[@]}" -eq 1 ] || fail "want one line, got: $output"
	[[ "$output" == apus:*9* ]] || fail "node id not named: $output"
	stop_cluster "$GOOD"
}

@test "--help of apus and of each command" {
	local args
	for args in "--help" "start --help" "stop --help" "status --help"; do
		# shellcheck disable=SC2086 # split into words on purpose
		run timeout 10 "$APUS" $args
		[ "$status" -eq 0 ] || fail "apus $args: exit $status: $output"
		grep -qi usage <<<"$output" || fail "apus $args: no usage: $output"
	done
	run timeout 10 "$APUS" start --help
	grep -q -- --config <<<"$output" || fail "apus start --help does not mention --config: $output"
	run timeout 10 "$APUS" status --help
	grep -q -- --json <<<"$output" || fail "apus status --help does not mention --json: $output"
}

@test "an unknown command fails" {
	run timeout 10 "$APUS" frobnicate
	[ "$status" -ne 0 ] || fail "apus frobnicate exited 0: $output"
	[ -n "$output" ] || fail "apus frobnicate said nothing"
}
