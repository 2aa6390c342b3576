#!/usr/bin/env bats
# Redis with I/O threads (threaded writes to client sockets, the io-threads
# default): replicas must still agree.

load helpers

setup_file() {
	# Redis's I/O threads busy-wait: with three servers of five threads on
	# two cores the leader's heartbeat can stall for hundreds of ms.  This
	# file is about replaying threaded writes, not failover: no suspicion.
	APUS_TEST_SUSPECT_MS=5000 file_cluster 17300 64M --io-threads 4
}

@test "every replica runs with 4 io threads" {
	local n
	for n in $(conf_nodes "$CONF"); do
		assert_eq "$(admin "$n" CONFIG GET io-threads | tr '\n' ' ')" "io-threads 4 " "node $n io-threads"
	done
}

@test "benchmark with io threads: digests equal" {
	# Fewer requests than digest.bats: 3 servers x 4 spinning io threads on
	# a 2-core machine make each unpipelined request slow: 10,000 requests
	# of 50 clients whose replies the io threads write.
	bench -t set,incr,lpush,sadd,hset -n 2000 -c 50 -r 100000 -q
	local keys
	keys=$(admin "$(leader_id)" DBSIZE)
	[ "$keys" -gt 1500 ] || fail "leader holds only $keys keys after the benchmark"
	wait_digests_equal "$CONF" 30
}

@test "pipelined benchmark with io threads: digests equal" {
	bench -t set,lpush -n 40000 -c 50 -P 16 -r 100000 -d 256 -q
	wait_digests_equal "$CONF" 30
}
