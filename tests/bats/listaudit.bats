#!/usr/bin/env bats
# listaudit (scripts/bench/listaudit.c), the acknowledged-writes audit
# client, against a plain redis-server: write logs the position of every
# acknowledged RPUSH, check finds the list tampered with. Each test uses its
# own key. Ports 17950-17999.

load helpers

LISTAUDIT="$APUS_ROOT/build/bench/listaudit"
REDIS_PORT=17951
NOBODY_PORT=17952 # nothing listens here
ADDR="127.0.0.1:$REDIS_PORT"

# rcli ARGS... - redis-cli against the test redis.
function rcli() { timeout 30 redis-cli -p "$REDIS_PORT" "$@"; }

# kill_listener PORT - kill a redis-server left listening on PORT by an
# aborted earlier run of this file.
function kill_listener() {
	local pid
	for pid in $(ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ] && kill -KILL "$pid" 2>/dev/null
	done
	return 0
}

setup_file() {
	have redis || return 0
	LA_DIR=$(test_dir listaudit)
	export LA_DIR
	kill_listener "$REDIS_PORT"
	# 3>&- : the server must not inherit bats' output fd, or bats waits for it.
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
		--unixsocket "$LA_DIR/redis.sock" --dir "$LA_DIR" >"$LA_DIR/redis.log" 2>&1 3>&- &
	echo $! >"$LA_DIR/redis.pid"
	retry 50 0.1 rcli PING
}

teardown_file() {
	local pid
	pid=$(cat "${LA_DIR:-/nonexistent}/redis.pid" 2>/dev/null) || return 0
	kill "$pid" 2>/dev/null || true
	wait_pids_gone 10 "$pid" || kill -KILL "$pid" 2>/dev/null || true
}

setup() {
	requires redis
	[ -x "$LISTAUDIT" ] || fail "listaudit not found at $LISTAUDIT (run make)"
	LOG="$BATS_TEST_TMPDIR/audit.log"
}

# la ARGS... - run listaudit; stdout and stderr in $output, exit in $status.
function la() {
	run timeout 120 "$LISTAUDIT" "$@"
}

# write_ok KEY CLIENTS COUNT - a write run to KEY that acks CLIENTS*COUNT
# elements, none failed, logged in $LOG.
function write_ok() {
	la write --addr "$ADDR" --log "$LOG" --key "$1" --clients "$2" --count "$3" --seconds 60
	[ "$status" -eq 0 ] || fail "write exited $status: $output"
	[[ "$output" =~ ^"listaudit: $(($2 * $3)) acked, 0 failed in "[0-9.]+" s"$ ]] ||
		fail "write: unexpected summary: $output"
}

# check_fails KEY SUMMARY - check exits 1 with the FAILED line SUMMARY.
function check_fails() {
	la check --addr "$ADDR" --log "$LOG" --key "$1"
	assert_eq "$status" 1 "check exit status ($output)"
	grep -qxF "listaudit: FAILED: $2" <<<"$output" || fail "want 'listaudit: FAILED: $2', got: $output"
}

# ok_line ACKED LEN FAILED PRESENT - check's line when all is well.
function ok_line() {
	echo "listaudit: ok: $1 acknowledged elements at their positions (list length $2, $3 failed requests of which $4 present)"
}

@test "write 4 x 500 then check: 2000 acks at positions 1..2000, each once" {
	local bad
	write_ok audit:a 4 500
	assert_eq "$(grep -c '^ack ' "$LOG")" 2000 "ack lines"
	assert_eq "$(grep -vc '^ack ' "$LOG")" 0 "other lines"
	assert_eq "$(cut -d' ' -f2 "$LOG" | sort -n | uniq | tr '\n' ' ')" "$(seq 1 2000 | tr '\n' ' ')" \
		"positions (sorted, distinct)"
	# Elements: c<client>-<seq>- padded with x to 100 bytes, all distinct.
	bad=$(cut -d' ' -f3 "$LOG" | grep -Evc '^c[0-3]-[0-9]+-x+$') || true
	assert_eq "$bad" 0 "elements not of the form c<client>-<seq>-xxx"
	bad=$(cut -d' ' -f3 "$LOG" | awk 'length($0) != 100' | wc -l)
	assert_eq "$bad" 0 "elements not of 100 bytes"
	assert_eq "$(cut -d' ' -f3 "$LOG" | sort -u | wc -l)" 2000 "distinct elements"
	assert_eq "$(grep -c ' c2-' "$LOG")" 500 "elements of client 2"
	# What the log says is what the list holds.
	assert_eq "$(rcli LLEN audit:a)" 2000 "LLEN"
	assert_eq "$(rcli LINDEX audit:a 41)" "$(awk '$2 == 42 { print $3 }' "$LOG")" "element at position 42"
	la check --addr "$ADDR" --log "$LOG" --key audit:a
	assert_eq "$status" 0 "check exit status ($output)"
	assert_eq "$output" "$(ok_line 2000 2000 0 0)" "check's line"
	# The same through the server's unix socket.
	la check --addr "$LA_DIR/redis.sock" --log "$LOG" --key audit:a
	assert_eq "$status/$output" "0/$(ok_line 2000 2000 0 0)" "check over the unix socket"
}

@test "check fails when an element is overwritten (LSET)" {
	write_ok audit:b 2 50
	la check --addr "$ADDR" --log "$LOG" --key audit:b
	assert_eq "$status" 0 "check exit status before the LSET ($output)"
	rcli LSET audit:b 10 bogus >/dev/null
	check_fails audit:b "1 missing or misplaced, 0 duplicated"
	grep -q "at position 11: the list has bogus there; it is not in the list" <<<"$output" ||
		fail "want the overwritten position named, got: $output"
}

@test "check fails when an element is there twice (RPUSH of a present one)" {
	local el
	write_ok audit:c 2 50
	el=$(rcli LINDEX audit:c 5)
	[ -n "$el" ] || fail "no element at index 5"
	assert_eq "$(rcli RPUSH audit:c "$el")" 101 "RPUSH of a duplicate"
	check_fails audit:c "0 missing or misplaced, 1 duplicated"
	grep -q "appears 2 times (positions 6, 101)" <<<"$output" || fail "want the duplicate's positions, got: $output"
}

@test "check fails when an element is removed (LREM)" {
	local el
	write_ok audit:d 2 50
	el=$(rcli LINDEX audit:d 49)
	assert_eq "$(rcli LREM audit:d 0 "$el")" 1 "LREM"
	# Position 50's element is gone, the 50 after it moved up by one.
	check_fails audit:d "51 missing or misplaced, 0 duplicated"
	grep -q "at position 50: .* it is not in the list" <<<"$output" || fail "want the removed one named, got: $output"
	grep -q "and 31 more problems" <<<"$output" || fail "want the first 20 problems and a count, got: $output"
}

@test "failed requests: reconnects across --addr, a failed element may be present once, not twice" {
	local el
	# The first --addr refuses: every client goes on to the second.
	la write --addr "127.0.0.1:$NOBODY_PORT" --addr "$ADDR" --log "$LOG" --key audit:e --clients 3 --count 100
	assert_eq "$status" 0 "write exit status ($output)"
	assert_eq "$(grep -c '^ack ' "$LOG")" 300 "ack lines"
	# A request that failed may or may not have happened.
	echo "fail c9-0-xx timeout" >>"$LOG"
	echo "fail c9-1-xx connection closed" >>"$LOG"
	la check --addr "$ADDR" --log "$LOG" --key audit:e
	assert_eq "$status/$output" "0/$(ok_line 300 300 2 0)" "check with 2 failed, absent"
	rcli RPUSH audit:e c9-1-xx >/dev/null
	la check --addr "$ADDR" --log "$LOG" --key audit:e
	assert_eq "$status/$output" "0/$(ok_line 300 301 2 1)" "check with 2 failed, 1 present"
	rcli RPUSH audit:e c9-1-xx >/dev/null
	check_fails audit:e "0 missing or misplaced, 1 duplicated"
	# Error replies are failures, never retried with the same element;
	# write stops when --seconds are over and exits 1.
	rcli SET audit:f not-a-list >/dev/null
	la write --addr "$ADDR" --log "$LOG" --key audit:f --clients 2 --count 10 --seconds 1
	assert_eq "$status" 1 "write exit status when the time runs out ($output)"
	[[ "${lines[0]}" =~ ^"listaudit: 0 acked, "[1-9][0-9]*" failed in " ]] || fail "unexpected summary: $output"
	el=$(head -n 1 "$LOG")
	[[ "$el" =~ ^"fail c"[01]"-0-x"+" -WRONGTYPE " ]] || fail "unexpected first log line: $el"
	assert_eq "$(cut -d' ' -f2 "$LOG" | sort | uniq -d | wc -l)" 0 "elements sent twice"
}

@test "bad usage exits 2 with a one-line error" {
	la
	assert_eq "$status" 2 "no arguments"
	la bogus
	assert_eq "$status" 2 "unknown command"
	la write --log "$LOG"
	assert_eq "$status/$output" "2/listaudit write: --addr is required (see listaudit write --help)" "no --addr"
	la check --addr "$ADDR"
	assert_eq "$status/$output" "2/listaudit check: --log is required (see listaudit check --help)" "no --log"
	la write --addr "$ADDR" --log "$LOG" --count abc
	assert_eq "$status" 2 "non-numeric --count ($output)"
	[[ "$output" == "listaudit write: --count: want an integer"* ]] || fail "want an error naming --count, got: $output"
	la write --addr "$ADDR" --log "$LOG" --bogus
	assert_eq "$status/${#lines[@]}" 2/1 "unknown flag: status/lines ($output)"
	la check --addr "$ADDR" --log "$LOG" --clients 3
	assert_eq "$status" 2 "a write flag given to check ($output)"
	la write --addr nope --log "$LOG"
	assert_eq "$status" 2 "--addr without a port ($output)"
	la write --help
	assert_eq "$status" 0 "write --help"
	[[ "${lines[0]}" == "usage: listaudit write "* ]] || fail "write --help: want usage, got: $output"
	la check --help
	assert_eq "$status" 0 "check --help"
	[[ "${lines[0]}" == "usage: listaudit check "* ]] || fail "check --help: want usage, got: $output"
	# Nothing was written by the refused runs.
	[ ! -e "$LOG" ] || fail "a refused run created $LOG"
}
