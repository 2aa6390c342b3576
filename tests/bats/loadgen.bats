#!/usr/bin/env bats
# loadgen (scripts/bench/loadgen.c), the closed-loop load generator of the
# benchmarks: against a bare redis-server, and against a one-member etcd
# when etcd is installed. Ports 17900-17949.

load helpers

LOADGEN="$APUS_ROOT/build/bench/loadgen"
REDIS_PORT=17901
NOBODY_PORT=17902 # nothing listens here
ETCD_PORT=17911
ETCD_PEER_PORT=17912
REDIS=(--host 127.0.0.1 --port "$REDIS_PORT")
ETCD=(--host 127.0.0.1 --port "$ETCD_PORT")

# rcli ARGS... - redis-cli against the test redis.
function rcli() { timeout 30 redis-cli -p "$REDIS_PORT" "$@"; }

# etcdctl3 ARGS... - etcdctl (v3 API) against the test etcd.
function etcdctl3() { ETCDCTL_API=3 timeout 30 etcdctl --endpoints "http://127.0.0.1:$ETCD_PORT" "$@"; }

# kill_listener PORT COMM - kill a COMM process left listening on PORT by
# an aborted earlier run of this file.
function kill_listener() {
	local pid
	for pid in $(ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] && kill -KILL "$pid" 2>/dev/null
	done
	return 0
}

setup_file() {
	have redis || return 0
	LG_DIR=$(test_dir loadgen)
	export LG_DIR
	kill_listener "$REDIS_PORT" redis-server
	# 3>&- : the daemon must not inherit bats' output fd.
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
		--daemonize yes --dir "$LG_DIR" >/dev/null 3>&-
	retry 50 0.1 rcli PING
}

function stop_etcd() {
	local pid
	pid=$(cat "${LG_DIR:-/nonexistent}/etcd.pid" 2>/dev/null) || return 0
	kill "$pid" 2>/dev/null || true
	wait_pids_gone 10 "$pid" || kill -KILL "$pid" 2>/dev/null || true
	rm -f "$LG_DIR/etcd.pid"
}

teardown_file() {
	rcli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	stop_etcd
}

setup() {
	requires redis
	[ -x "$LOADGEN" ] || fail "loadgen not found at $LOADGEN (run make)"
}

# lg ARGS... - run loadgen; its line in $output, its exit in $status.
function lg() {
	run timeout 120 "$LOADGEN" "$@"
}

# field KEY - the value of KEY in loadgen's line in $output.
function field() {
	grep -o "\(^\| \)$1=[^ ]*" <<<"$output" | head -n 1 | cut -d= -f2
}

# check_line - $output is exactly one well-formed line, percentiles in order.
function check_line() {
	local re='^proto=[a-z-]+ op=(set|get) clients=[0-9]+ size=[0-9]+ n=[0-9]+ secs=[0-9.]+ rps=[0-9]+'
	re+=' p50_us=[0-9.]+ p99_us=[0-9.]+ p999_us=[0-9.]+ max_us=[0-9.]+ errors=[0-9]+ short_waits=[0-9]+$'
	if [ "${#lines[@]}" -ne 1 ] || ! [[ "$output" =~ $re ]]; then
		fail "want one line of loadgen's fields, got: $output"
	fi
	awk -v a="$(field p50_us)" -v b="$(field p99_us)" -v c="$(field p999_us)" -v d="$(field max_us)" \
		'BEGIN { exit !(0 < a && a <= b && b <= c && c <= d) }' ||
		fail "percentiles out of order: $output"
}

# lg_ok N ARGS... - loadgen ARGS completes N requests, no error, exit 0.
function lg_ok() {
	local n=$1
	shift
	lg "$@"
	[ "$status" -eq 0 ] || fail "loadgen $* exited $status: $output"
	check_line
	assert_eq "$(field n)" "$n" "n"
	assert_eq "$(field errors)" 0 "errors"
	assert_eq "$(field short_waits)" 0 "short_waits"
}

@test "redis SET: N requests over K keys, values of --size bytes" {
	local k n bad
	rcli FLUSHALL >/dev/null
	lg_ok 5000 "${REDIS[@]}" --proto redis --op set --clients 10 --requests 5000 --keyspace 1000 --size 100
	assert_eq "$(field proto)/$(field op)/$(field clients)/$(field size)" redis/set/10/100 "echoed options"
	n=$(rcli DBSIZE)
	if [ "$n" -lt 1 ] || [ "$n" -gt 1000 ]; then
		fail "DBSIZE: got $n, want 1..1000"
	fi
	bad=$(rcli --scan | grep -Evc '^key:([0-9]|[1-9][0-9]{1,2})$') || true
	assert_eq "$bad" 0 "keys outside key:0..key:999"
	k=$(rcli RANDOMKEY)
	assert_eq "$(rcli STRLEN "$k")" 100 "STRLEN $k"
	assert_eq "$(rcli GET "$k")" "$(printf 'x%.0s' {1..100})" "GET $k"
}

@test "redis GET, and 4 KB values through SET and GET" {
	local hits
	lg_ok 5000 "${REDIS[@]}" --proto redis --op get --clients 10 --requests 5000 --keyspace 1000
	rcli FLUSHALL >/dev/null
	lg_ok 2000 "${REDIS[@]}" --proto redis --op set --size 4096 --requests 2000 --keyspace 100
	assert_eq "$(rcli STRLEN "$(rcli RANDOMKEY)")" 4096 "STRLEN of a key"
	rcli CONFIG RESETSTAT >/dev/null
	lg_ok 2000 "${REDIS[@]}" --proto redis --op get --requests 2000 --keyspace 100
	# Every one of the 100 keys was set (2000 draws): all GETs hit.
	hits=$(rcli INFO stats | tr -d '\r' | sed -n 's/^keyspace_hits://p')
	assert_eq "$hits" 2000 "keyspace_hits"
	# Replies larger than loadgen's first read buffer span many reads.
	lg_ok 200 "${REDIS[@]}" --proto redis --op set --size 100000 --requests 200 --keyspace 5
	lg_ok 200 "${REDIS[@]}" --proto redis --op get --requests 200 --keyspace 5
}

@test "redis: error replies and killed connections are errors" {
	rcli FLUSHALL >/dev/null
	rcli RPUSH key:0 a >/dev/null
	lg "${REDIS[@]}" --proto redis --op get --keyspace 1 --clients 2 --requests 10
	assert_eq "$status" 1 "exit status with WRONGTYPE replies ($output)"
	check_line
	assert_eq "$(field n)/$(field errors)" 10/10 "n/errors"
	# Slow requests (WAIT 1 50 on a lone redis), so that the kill lands
	# mid-run: the clients reconnect and the run completes.
	timeout 120 "$LOADGEN" "${REDIS[@]}" --proto redis-wait --op set --replicas 1 --wait-timeout-ms 50 \
		--clients 5 --requests 50 >"$BATS_TEST_TMPDIR/out" 2>&1 &
	sleep 0.3
	rcli CLIENT KILL TYPE normal >/dev/null
	wait $! || true
	output=$(cat "$BATS_TEST_TMPDIR/out")
	assert_eq "$(field n)" 50 "n after the kill ($output)"
	[ "$(field errors)" -gt 0 ] || fail "want errors > 0 after CLIENT KILL, got: $output"
}

@test "redis-wait: WAIT after each SET; fewer replicas than asked are short waits" {
	lg_ok 500 "${REDIS[@]}" --proto redis-wait --op set --replicas 0 --requests 500
	# A lone redis has no replica: WAIT 1 50 answers 0 after 50 ms.
	lg "${REDIS[@]}" --proto redis-wait --op set --replicas 1 --wait-timeout-ms 50 --clients 5 --requests 20
	assert_eq "$status" 1 "exit status with short waits ($output)"
	check_line
	assert_eq "$(field n)/$(field errors)/$(field short_waits)" 20/0/20 "n/errors/short_waits"
}

@test "arguments, and a server that is not there" {
	lg --help
	assert_eq "$status" 0 "--help exit status"
	[[ "${lines[0]}" == usage:* ]] || fail "--help: want usage, got: $output"
	lg "${REDIS[@]}" --proto redis --clients 0
	assert_eq "$status" 2 "exit status for --clients 0 ($output)"
	[[ "${lines[0]}" == "loadgen: --clients"* ]] || fail "want an error naming --clients, got: $output"
	lg --proto redis --host 127.0.0.1
	assert_eq "$status" 2 "exit status without --port ($output)"
	lg --host 127.0.0.1 --port "$NOBODY_PORT" --proto redis --clients 3 --requests 10 --timeout-s 5
	assert_eq "$status" 1 "exit status with nothing listening ($output)"
	output=$(grep '^proto=' <<<"$output")
	assert_eq "$(field n)" 0 "n"
	[ "$(field errors)" -gt 0 ] || fail "want errors > 0, got: $output"
}

@test "etcd: put and range through the v3 JSON gateway" {
	local k d n
	command -v etcd >/dev/null 2>&1 || skip "etcd not installed (apt-get install etcd-server)"
	command -v etcdctl >/dev/null 2>&1 || skip "etcdctl not installed (apt-get install etcd-client)"
	stop_etcd
	kill_listener "$ETCD_PORT" etcd
	d="$LG_DIR/etcd"
	rm -rf "$d"
	mkdir -p "$d"
	etcd --name lg --data-dir "$d/data" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "lg=http://127.0.0.1:$ETCD_PEER_PORT" >"$d/etcd.log" 2>&1 3>&- &
	echo $! >"$LG_DIR/etcd.pid"
	retry 100 0.1 etcdctl3 endpoint health || fail "etcd did not start: $(tail -n 20 "$d/etcd.log")"

	lg_ok 2000 "${ETCD[@]}" --proto etcd --op set --requests 2000
	lg_ok 2000 "${ETCD[@]}" --proto etcd --op get --requests 2000
	n=$(etcdctl3 get key: --prefix --keys-only | grep -c key:) || true
	[ "$n" -gt 0 ] || fail "no key:* in etcd after loadgen --op set"
	# Keys and values went through our base64: they come back whole.
	k=$(etcdctl3 get key: --prefix --keys-only --limit 1 | head -n 1)
	[[ "$k" =~ ^key:[0-9]+$ ]] || fail "unexpected key '$k'"
	assert_eq "$(etcdctl3 get "$k" --print-value-only)" "$(printf 'x%.0s' {1..64})" "value of $k"
	# Ranges of 4 KB values come back chunked.
	lg_ok 200 "${ETCD[@]}" --proto etcd --op set --size 4096 --keyspace 10 --requests 200
	lg_ok 200 "${ETCD[@]}" --proto etcd --op get --keyspace 10 --requests 200
}
