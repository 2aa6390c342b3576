#!/usr/bin/env bats
# Deterministic replicas (the clock as an input of the log): what a server
# reads from the wall clock while it handles a client's input is the
# leader's clock when it logged that input, on every replica, across a
# failover and a restart from a recovery point.  Ports 19600-19699.

load helpers

setup_file() {
	file_cluster 19600
}

# pexpiretimes KEY - each node's PEXPIRETIME of KEY, one per line.
function pexpiretimes() {
	local n
	for n in $(conf_nodes "$CONF"); do
		admin "$n" PEXPIRETIME "$1"
	done
}

# stream_ids KEY - each node's XRANGE IDs of KEY, one line per node.
function stream_ids() {
	local n
	for n in $(conf_nodes "$CONF"); do
		admin "$n" XRANGE "$1" - + | grep -E '^[0-9]+-[0-9]+$' | tr '\n' ' '
		echo
	done
}

# clock_writes TAG - XADDs with auto IDs, TIME stored by a script, SET EX
# and EXPIRE deadlines, with a load of other clients around them.
function clock_writes() {
	local port i
	port=$(leader_port)
	bench -t set -n 20000 -r 100000 -c 10 -q >/dev/null &
	for ((i = 0; i < 50; i++)); do
		echo "XADD st:$1 * n $i"
		echo "EVAL \"return redis.call('set', KEYS[1], table.concat(redis.call('TIME'), '.'))\" 1 t:$1:$i"
		echo "SET ex:$1:$i v EX 1000"
		echo "SET px:$1:$i v"
		echo "EXPIRE px:$1:$i 500"
	done | redis-cli -h "$(leader_host)" -p "$port" >/dev/null
	wait
}

# same_everywhere TAG - the state TAG's writes left is equal on every node.
function same_everywhere() {
	local ids times
	wait_digests_equal "$CONF" 30 || return 1
	ids=$(stream_ids "st:$1" | sort -u | wc -l)
	[ "$ids" = 1 ] || { echo "stream IDs differ: $(stream_ids "st:$1")" >&2; return 1; }
	[ "$(stream_ids "st:$1" | head -n 1 | wc -w)" -ge 50 ] || { echo "short stream" >&2; return 1; }
	times=$(pexpiretimes "ex:$1:7" | sort -u | wc -l)
	[ "$times" = 1 ] || { echo "SET EX deadlines differ: $(pexpiretimes "ex:$1:7")" >&2; return 1; }
	times=$(pexpiretimes "px:$1:9" | sort -u | wc -l)
	[ "$times" = 1 ] || { echo "EXPIRE deadlines differ: $(pexpiretimes "px:$1:9")" >&2; return 1; }
}

@test "XADD *, TIME in a script, SET EX and EXPIRE: the same on every replica" {
	clock_writes a
	same_everywhere a || fail "replicas differ: $(digests)"
	local t
	t=$(redis-cli -h "$(leader_host)" -p "$(leader_port)" GET t:a:3)
	[[ "$t" =~ ^1[0-9]{9}\.[0-9]+$ ]] || fail "TIME stored by the script: '$t'"
}

@test "after a failover the stream's IDs go on increasing and every replica agrees" {
	local lead last first
	clock_writes b
	last=$(admin "$(leader_id)" XREVRANGE st:b + - COUNT 1 | head -n 1)
	lead=$(leader_id)
	kill -KILL "$(redis_pid "$lead")"
	wait_new_leader "$lead"
	run timeout 60 "$APUS" start --config "$CONF" --node "$lead" 3>&-
	assert_eq "$status" 0 "apus start --node $lead: $output"
	retry 100 0.2 all_backups >/dev/null || fail "node $lead did not come back: $(status_json)"
	clock_writes b
	first=$(admin "$(leader_id)" XRANGE st:b - + | grep -E '^[0-9]+-[0-9]+$' | sed -n 51p)
	[ "${first%-*}" -ge "${last%-*}" ] || fail "IDs went back: $last then $first"
	same_everywhere b || fail "replicas differ: $(digests)"
}

@test "a replica restarted from its recovery point replays the clock it was given" {
	local victim
	clock_writes c
	victim=$(backups | head -n 1)
	run timeout 60 "$APUS" stop --config "$CONF" --node "$victim" 3>&-
	assert_eq "$status" 0 "apus stop --node $victim: $output"
	clock_writes d
	run timeout 60 "$APUS" start --config "$CONF" --node "$victim" 3>&-
	assert_eq "$status" 0 "apus start --node $victim: $output"
	same_everywhere c || fail "replicas differ: $(digests)"
	same_everywhere d || fail "replicas differ: $(digests)"
}
