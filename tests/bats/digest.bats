#!/usr/bin/env bats
# Every replica ends with the same data set (DEBUG DIGEST) after real client
# traffic: concurrent clients, pipelining, per-connection state (SELECT,
# MULTI/EXEC) and values larger than any buffer.

load helpers

setup_file() {
	file_cluster 17200
}

# dbsize NODE [DB] - DBSIZE of NODE's database DB.
function dbsize() {
	admin "$1" -n "${2:-0}" DBSIZE
}

@test "50 concurrent clients: set, incr, lpush, sadd, hset" {
	bench -t set,incr,lpush,sadd,hset -n 20000 -c 50 -r 100000 -q
	local leader keys
	leader=$(leader_id)
	keys=$(dbsize "$leader")
	# set alone writes ~18,000 distinct keys: 20,000 picks of 100,000.
	[ "$keys" -gt 15000 ] || fail "leader holds only $keys keys after the benchmark"
	wait_digests_equal "$CONF" 30
}

@test "pipelined clients (-P 32)" {
	local keys
	# Through the app port: writes on the admin socket are not replicated.
	run redis-cli -h "$(leader_host)" -p "$(leader_port)" FLUSHALL
	assert_eq "$output" OK FLUSHALL
	wait_equal_on_all "$CONF" 0 DBSIZE
	bench -t set,incr,lpush,sadd,hset -n 20000 -c 50 -P 32 -r 100000 -q
	keys=$(admin "$(leader_id)" DBSIZE)
	[ "$keys" -gt 15000 ] || fail "leader holds only $keys keys after the benchmark"
	wait_digests_equal "$CONF" 30
}

# Execution order matters here: every APPEND and RPUSH of 50 clients goes to
# the same key, so a replica that ran two clients' commands in another
# order than the leader ends with another value.  The APPENDs carry 20 KB,
# more than Redis reads at once, so its reads of one client interleave with
# the others' (the leader's read-ahead must still keep log order).
@test "50 clients writing one key in turn: the same order on every replica" {
	local big leader len
	big=$(head -c 20000 /dev/zero | tr '\0' x)
	bench -c 50 -n 3000 -r 1000000 RPUSH shared:list __rand_int__ >/dev/null
	bench -c 50 -n 600 -r 1000000 APPEND shared:str "__rand_int__$big" >/dev/null
	leader=$(leader_id)
	assert_eq "$(admin "$leader" LLEN shared:list)" 3000 "LLEN on the leader"
	len=$(admin "$leader" STRLEN shared:str)
	[ "$len" -gt $((600 * 20000)) ] || fail "STRLEN $len on the leader"
	wait_equal_on_all "$CONF" "$len" STRLEN shared:str
	wait_digests_equal "$CONF" 30
}

@test "SELECT and MULTI/EXEC in one client session" {
	local port
	port=$(leader_port)
	run redis-cli -h "$(leader_host)" -p "$port" <<<$'SELECT 3\nMULTI\nSET a 1\nINCR a\nEXEC'
	assert_eq "$status" 0 "redis-cli exit"
	assert_eq "$(echo "$output" | tr '\n' ' ')" "OK OK QUEUED QUEUED OK 2 " "replies"
	wait_equal_on_all "$CONF" 2 -n 3 GET a
	# The session's SELECT must not leak into db 0 on any replica.
	wait_equal_on_all "$CONF" "" -n 0 GET a
	wait_digests_equal "$CONF" 30
}

@test "interleaved sessions keep their own db and transaction" {
	local port A B
	port=$(leader_port)
	exec {A}<>"/dev/tcp/$(leader_host)/$port"
	exec {B}<>"/dev/tcp/$(leader_host)/$port"
	resp_cmd "$A" "+OK" SELECT 4
	resp_cmd "$B" "+OK" SELECT 5
	resp_cmd "$A" "+OK" MULTI
	resp_cmd "$B" "+OK" MULTI
	resp_cmd "$A" "+QUEUED" SET who A
	resp_cmd "$B" "+QUEUED" SET who B
	resp_cmd "$A" "+QUEUED" INCR n
	resp_cmd "$B" "+QUEUED" INCR n
	resp_cmd "$B" "+QUEUED" INCR n
	resp_cmd "$B" "*3 +OK :1 :2" EXEC
	# A's transaction is still open while B committed.
	resp_cmd "$A" "+QUEUED" INCR n
	resp_cmd "$A" "*3 +OK :1 :2" EXEC
	resp_cmd "$A" ":3" INCR n
	resp_cmd "$B" "B" GET who
	exec {A}>&- {B}>&-
	wait_equal_on_all "$CONF" A -n 4 GET who
	wait_equal_on_all "$CONF" 3 -n 4 GET n
	wait_equal_on_all "$CONF" B -n 5 GET who
	wait_equal_on_all "$CONF" 2 -n 5 GET n
	wait_equal_on_all "$CONF" "" -n 0 GET who
	wait_digests_equal "$CONF" 30
}

@test "a client that dies inside MULTI leaves no transaction behind" {
	local port A
	port=$(leader_port)
	exec {A}<>"/dev/tcp/$(leader_host)/$port"
	resp_cmd "$A" "+OK" SELECT 6
	resp_cmd "$A" "+OK" MULTI
	resp_cmd "$A" "+QUEUED" SET ghost 1
	exec {A}>&-
	# The next client (likely on the same fd number) must start clean.
	run redis-cli -h "$(leader_host)" -p "$port" <<<$'SELECT 6\nSET real 1\nGET ghost\nGET real'
	assert_eq "$(echo "$output" | tr '\n' ' ')" "OK OK  1 " "replies"
	wait_equal_on_all "$CONF" 1 -n 6 GET real
	wait_equal_on_all "$CONF" "" -n 6 GET ghost
	wait_digests_equal "$CONF" 30
}

@test "an 8 MB value" {
	local port size=8388608
	port=$(leader_port)
	run bash -c "head -c $size /dev/zero | tr '\\0' x | timeout 60 redis-cli -h $(leader_host) -p $port -x SET big"
	assert_eq "$status/$output" "0/OK" "SET big"
	wait_equal_on_all "$CONF" "$size" STRLEN big
	# Same bytes, not only same length.
	wait_equal_on_all "$CONF" xxxxxxxx GETRANGE big 4194300 4194307
	wait_equal_on_all "$CONF" xxxx GETRANGE big -4 -1
	run bash -c "head -c $size /dev/zero | tr '\\0' y | timeout 60 redis-cli -h $(leader_host) -p $port -x APPEND big"
	assert_eq "$status/$output" "0/$((2 * size))" "APPEND big"
	wait_equal_on_all "$CONF" "$((2 * size))" STRLEN big
	wait_equal_on_all "$CONF" xy GETRANGE big $((size - 1)) "$size"
	wait_digests_equal "$CONF" 30
}
