#!/usr/bin/env bats
# Many short-lived client connections: each one is replayed on the backups
# and must be closed there too, or the backups leak fds and clients.

load helpers

setup_file() {
	file_cluster 17400
}

# fds NODE - how many fds NODE's redis holds open.
function fds() {
	local pid
	pid=$(redis_pid "$1") || return 1
	[ -d "/proc/$pid/fd" ] || fail "node $1: redis pid '$pid' is gone" || return 1
	find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l
}

# clients NODE - connected_clients of NODE (the admin client included).
function clients() {
	admin "$1" INFO clients | tr -d '\r' | sed -n 's/^connected_clients://p'
}

# settled NODE MAX - NODE holds at most MAX fds.
function settled() {
	[ "$(fds "$1")" -le "$2" ]
}

@test "2,000 short-lived connections leak no fd and no client" {
	local n nodes=() before=() cbefore=() leader
	leader=$(leader_id)
	mapfile -t nodes < <(backups)
	[ "${#nodes[@]}" -ge 1 ] || fail "no backup in apus status"
	nodes+=("$leader")
	# One request first, so that lazily opened files are already counted.
	run redis-cli -h "$(leader_host)" -p "$(leader_port)" SET warm 1
	assert_eq "$output" OK "SET warm"
	wait_digests_equal "$CONF" 30
	for n in "${nodes[@]}"; do
		before[n]=$(fds "$n")
		cbefore[n]=$(clients "$n")
	done

	# -k 0: a new connection for every request.
	bench -t set -n 2000 -c 20 -k 0 -q
	# 50 at once, so that connects and closes overlap.
	bench -t ping -n 200 -c 50 -k 0 -q

	wait_digests_equal "$CONF" 30
	for n in "${nodes[@]}"; do
		if ! retry 50 0.2 settled "$n" $((before[n] + 5)); then
			fail "node $n: $(fds "$n") fds open after 2,200 connections, ${before[n]} before"$'\n'"$(ls -l "/proc/$(redis_pid "$n")/fd")"
		fi
		local c
		c=$(clients "$n")
		[ "$c" -le "${cbefore[n]}" ] || fail "node $n: $c clients connected after, ${cbefore[n]} before"
	done
}

@test "QUIT, and clients that close with replies unread" {
	local port n nodes before=() i j fd
	port=$(leader_port)
	nodes=$(conf_nodes "$CONF")
	for n in $nodes; do
		before[n]=$(fds "$n")
	done
	# QUIT: the server closes the connection after its reply.
	for ((i = 0; i < 50; i++)); do
		run redis-cli -h "$(leader_host)" -p "$port" <<<$'INCR quits\nQUIT'
		# (redis-cli prints nothing for QUIT's +OK)
		assert_eq "$status/$output" "0/$((i + 1))" "INCR+QUIT $i"
	done
	# The client sends a burst and hangs up without reading: the leader's
	# writes of the replies fail, however many commands it ran must be what
	# the backups run.
	for ((i = 0; i < 20; i++)); do
		exec {fd}<>"/dev/tcp/$(leader_host)/$port"
		for ((j = 0; j < 500; j++)); do
			printf 'INCR burst\r\n'
		done >&"$fd"
		exec {fd}>&-
	done
	wait_digests_equal "$CONF" 30
	for n in $nodes; do
		retry 50 0.2 settled "$n" $((before[n] + 5)) ||
			fail "node $n: $(fds "$n") fds open, ${before[n]} before"
	done
	wait_equal_on_all "$CONF" 50 GET quits
}
