#!/usr/bin/env bats
# shellcheck disable=SC2154 # status and output are set by bats' run.
# Servers that wait for their clients with poll() or select() rather than
# epoll (clamd waits with poll(), libupnp with select()), and that take a
# read finding nothing after the wait said readable for an error on the
# connection: tests/tools/poller_server.py, one thread, a counter its
# clients increment.  On a backup the role thread writes a connection's
# bytes into its socket ahead of their turn, so the kernel says readable
# early; the shim reports a connection readable only on its turn
# (preload/poll.c, preload/select.c).  Before, a backup's server read out
# of turn, got EAGAIN and dropped the connection.  Ports 18800-18899.

load helpers

# poller_cluster MODE PORTBASE - a cluster of poller_server.py MODE.
function poller_cluster() {
	CONF=$(APUS_TEST_SNAPSHOTS=off make_conf "$(test_dir "$1$2")" "$2")
	sed -i -e "/^seed_function/d" \
		-e "s|^app_cmd .*|app_cmd = /usr/bin/python3 $APUS_ROOT/tests/tools/poller_server.py $1 {address} {port}|" \
		"$CONF"
	start_cluster "$CONF" || fail "the cluster did not start"
}

function teardown() {
	[ -n "${CONF:-}" ] && stop_cluster "$CONF"
	return 0
}

# counts NODE - the counter values NODE's server answered, in order.
function counts() { cat "$(data_dir "$1")/counter.log" 2>/dev/null; }

# has_counts NODE TOTAL - NODE's server answered TOTAL incr.
function has_counts() { [ "$(counts "$1" | wc -l)" = "$2" ]; }

# incr_clients CLIENTS N - CLIENTS connections at once to the leader, each
# sending "incr" N times, one at a time; every answer, one per line.
function incr_clients() {
	timeout 120 /usr/bin/python3 -c '
import socket, sys, threading
host, port, clients, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out, lock = [], threading.Lock()
def client():
    s = socket.create_connection((host, port))
    f = s.makefile("rwb")
    for _ in range(n):
        f.write(b"incr\n"); f.flush()
        line = f.readline()
        with lock:
            out.append(line.decode().strip())
threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
print("\n".join(out))' "$(leader_host)" "$(leader_port)" "$1" "$2"
}

# every_replica_counts_as_the_leader TOTAL - every node's counter.log holds
# 1..TOTAL in the leader's order, and no backup's output differed.
function every_replica_counts_as_the_leader() {
	local n j lead
	lead=$(leader_id)
	assert_eq "$(counts "$lead" | wc -l)" "$1" "the leader's answers"
	for n in $(conf_nodes "$CONF"); do
		retry 100 0.1 has_counts "$n" "$1" ||
			fail "node $n answered $(counts "$n" | wc -l) of $1 incr (its log: $(grep dropped "$(data_dir "$n")/apus.log" | head -n 3))"
		assert_eq "$(counts "$n")" "$(counts "$lead")" "node $n's answers"
	done
	j=$(timeout 30 "$APUS" divergence --config "$CONF" --json 3>&-)
	assert_eq "$(json_field "$(strip_nodes "$j")" total)" 0 "divergence records: $j"
}

@test "a server waiting with poll(): 10 clients incrementing one counter: every replica answers as the leader" {
	poller_cluster poll 18800
	run incr_clients 10 50
	assert_eq "$(grep -c '^[0-9]' <<<"$output")" 500 "answers the clients got"
	every_replica_counts_as_the_leader 500
}

@test "a server waiting with select(): 10 clients incrementing one counter: every replica answers as the leader" {
	poller_cluster select 18850
	run incr_clients 10 50
	assert_eq "$(grep -c '^[0-9]' <<<"$output")" 500 "answers the clients got"
	every_replica_counts_as_the_leader 500
}
