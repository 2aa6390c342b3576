#!/usr/bin/env bats
# Hostile peers and clients (issue 22), against a real tcp cluster of
# redis-servers on 127.0.0.1: a peer with the wrong cluster key, a replayed
# handshake, frames outside what a peer may write, a stall mid-frame or
# mid-handshake; a client sending a 1 GB bulk string, tens of thousands of
# connections, half-open and vanished connections, requests cut mid-way.
# After each: the replicas keep serving, their digests stay equal, the
# leader's memory stays bounded, and where a node refuses something it says
# so in its log.  The peer and the clients are tests/tools/hostile_*.py.

load helpers

PEER="$APUS_ROOT/tests/tools/hostile_peer.py"
CLIENT="$APUS_ROOT/tests/tools/hostile_client.py"
# The leader's VmRSS may grow by this much over a test (Redis's client
# structures and allocator caches), no more: an unbounded buffer would not
# stay under it.
RSS_SLACK_KB=$((64 * 1024))

function setup_file() {
	have redis || return 0
	# Regions in a directory of our own on the memory file system: a
	# test run beside this one clears /dev/shm/apus-*.region it did not make.
	if [ -z "${APUS_TEST_REGION_DIR:-}" ]; then
		HOSTILE_SHM=$(mktemp -d /dev/shm/apus-hostile.XXXXXX)
		export HOSTILE_SHM APUS_TEST_REGION_DIR=$HOSTILE_SHM
	fi
	# On 127.0.0.1 whatever the environment says: the tests speak to
	# loopback addresses and sniff the loopback interface.
	CONF=$(APUS_TEST_NETNS='' APUS_TEST_TRANSPORT=tcp make_conf "$(test_dir cluster)" 19400)
	export CONF
	# Offsets in the control page, from the header the nodes are built with.
	OFFSETS="$BATS_FILE_TMPDIR/offsets"
	export OFFSETS
	cat >"$OFFSETS.c" <<-'EOF'
		#include <stddef.h>
		#include <stdio.h>
		#include <stdlib.h>
		#include "coordinator/storage/region_mail.h"
		#include "coordinator/storage/region_status.h"
		#include "coordinator/storage/region_wire.h"
		#define O(f) printf(#f " %zu\n", offsetof(struct region_ctl, f))
		int main(int argc, char **argv)
		{
			int c = argc > 1 ? atoi(argv[1]) : 0, o = argc > 2 ? atoi(argv[2]) : 0;
			printf("size %zu\n", region_size_for(64u << 20));	/* make_conf's log_size */
			printf("own_pad %zu\n", offsetof(struct region_ctl, lead) +
			       c * sizeof(struct lead_slot) + offsetof(struct lead_slot, pad));
			printf("other_lead %zu\n", offsetof(struct region_ctl, lead) +
			       o * sizeof(struct lead_slot));
			printf("other_vote %zu\n", offsetof(struct region_ctl, vote) +
			       o * sizeof(struct vote_slot));
			O(magic); O(dur.view); O(dur.voted_view);
			printf("status.role %zu\n", REGION_STATUS_OFF + offsetof(struct node_status, role));
			printf("ckpt.req %zu\n", REGION_MAIL_OFF + offsetof(struct region_mail, ckpt.req));
			return 0;
		}
	EOF
	cc -I"$APUS_ROOT" -o "$OFFSETS" "$OFFSETS.c"
	start_cluster "$CONF"
}

function teardown_file() {
	stop_cluster "${CONF:-}"
	[ -n "${HOSTILE_SHM:-}" ] && rm -rf "$HOSTILE_SHM"
	return 0
}

function setup() {
	requires redis
	command -v python3 >/dev/null || skip "test requires python3 (scripts/install-deps.sh)"
	LEADER=$(leader_id) || fail "no leader"
	RSS_BEFORE=$(rss_kb "$(redis_pid "$LEADER")")
}

function teardown() {
	# Never leave a hostile process or a cluster of a test behind a
	# failed test.
	local p
	for p in ${BG_PIDS:-}; do
		kill -KILL "$p" 2>/dev/null || true
	done
	[ -n "${GCONF:-}" ] && stop_cluster "$GCONF"
	return 0
}

function peer_port() { conf_node_get "$CONF" "$1" peer_port; }
function key_file() { echo "$(dirname "$CONF")/apus.key"; }
function rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
function fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l; }
function region_file() { readlink -f "$(data_dir "$1")/apus.region"; }
function offset() { "$OFFSETS" "${2:-0}" "${3:-0}" | awk -v k="$1" '$1 == k { print $2 }'; }

# word_at NODE OFFSET - the 8 bytes at OFFSET of NODE's region, in hex.
function word_at() {
	od -An -tx1 -j "$2" -N 8 "$(region_file "$1")" | tr -d ' \n'
}

# log_lines NODE - how many lines NODE's apus.log holds now (not in a
# variable named lines: bats' run sets that one).
function log_lines() { wc -l <"$(data_dir "$1")/apus.log"; }

# log_since NODE LINES PATTERN - a line past the first LINES of NODE's log
# matches the extended regex PATTERN.
function log_since() {
	tail -n +"$(($2 + 1))" "$(data_dir "$1")/apus.log" | grep -qE "$3"
}

# serving TAG - a write and a read through the leader, every replica gets
# it, and the replicas' digests are equal.
function serving() {
	local port host got
	port=$(leader_port) || fail "no leader" || return 1
	host=$(leader_host)
	got=$(timeout 10 redis-cli -h "$host" -p "$port" SET "after:$1" "$1" 2>&1)
	assert_eq "$got" OK "SET through the leader after $1" || return 1
	got=$(timeout 10 redis-cli -h "$host" -p "$port" GET "after:$1" 2>&1)
	assert_eq "$got" "$1" "GET through the leader after $1" || return 1
	wait_equal_on_all "$CONF" "$1" GET "after:$1" || return 1
	wait_digests_equal "$CONF" 30
}

# rss_bounded - the leader's VmRSS grew by less than RSS_SLACK_KB.
function rss_bounded() {
	local now
	now=$(rss_kb "$(redis_pid "$LEADER")")
	echo "leader VmRSS: ${RSS_BEFORE} kB before, ${now} kB after"
	[ "$now" -lt $((RSS_BEFORE + RSS_SLACK_KB)) ] ||
		fail "the leader's VmRSS grew from $RSS_BEFORE kB to $now kB"
}

# fds_back NODE BASE - NODE's server holds at most BASE+8 descriptors
# again within 30 s (the closes of a burst take a moment to replay).
function fds_back() {
	local pid n i
	pid=$(redis_pid "$1")
	for ((i = 0; i < 60; i++)); do
		n=$(fd_count "$pid")
		[ "$n" -le $(($2 + 8)) ] && return 0
		sleep 0.5
	done
	fail "node $1 holds $n descriptors, $2 before: connections leaked"
}

# tail_has FILE LINES PATTERN - a line past the first LINES of FILE matches
# the extended regex PATTERN.
function tail_has() { tail -n +"$(($2 + 1))" "$1" | grep -qE "$3"; }

# caught_up NODE - NODE executed everything the leader committed.
function caught_up() {
	local j
	j=$(status_json)
	[ "$(status_node "$j" "$1" applied)" = "$(status_node "$j" "$LEADER" commit)" ]
}

# two_backups - the backups' ids in B and C: B the target of a hostile
# peer that claims to be C.
function two_backups() {
	local bs
	bs=$(all_backups) || return 1
	B=$(head -n 1 <<<"$bs")
	C=$(tail -n 1 <<<"$bs")
}

@test "a peer with the wrong cluster key is refused and logged; the leader's log and role are untouched" {
	local wrong="$BATS_TEST_TMPDIR/wrong.key" j commit view mark first
	two_backups
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$wrong"
	chmod 600 "$wrong"
	j=$(status_json)
	commit=$(status_node "$j" "$LEADER" commit)
	view=$(status_node "$j" "$LEADER" view)
	mark=$(log_lines "$LEADER")
	# Each time with a frame right behind its proof, onto the first
	# word of the leader's log.
	first=$(word_at "$LEADER" 8192)
	for _ in 1 2 3; do
		run python3 "$PEER" --port "$(peer_port "$LEADER")" --from "$C" --to "$LEADER" \
			handshake --key "$wrong" --expect refused --then-frame 8192 8
		echo "$output"
		[ "$status" -eq 0 ] || fail "the leader admitted a peer with the wrong key: $output"
	done
	retry 20 0.2 log_since "$LEADER" "$mark" \
		"refused a peer connection from 127\.0\.0\.1:[0-9]+: claims to be node $C but does not know the cluster secret"
	assert_eq "$(word_at "$LEADER" 8192)" "$first" "the first word of the leader's log"
	j=$(status_json)
	assert_eq "$(status_node "$j" "$LEADER" commit)" "$commit" "the leader's commit index"
	assert_eq "$(status_node "$j" "$LEADER" role)/$(status_node "$j" "$LEADER" view)" "leader/$view" \
		"the leader's role and view"
	serving wrongkey
	rss_bounded
}

@test "a genuine handshake recorded off the wire and replayed is refused and logged" {
	local rec="$BATS_TEST_TMPDIR/handshake" ready="$BATS_TEST_TMPDIR/sniffing" sniffer mark i commit
	two_backups
	# Record node C's own handshake with the leader as C restarts.
	python3 "$PEER" --port "$(peer_port "$LEADER")" sniff --record "$rec" --ready "$ready" \
		--timeout 30 >"$BATS_TEST_TMPDIR/sniff.out" 2>&1 3>&- &
	sniffer=$!
	BG_PIDS=$sniffer
	for ((i = 0; i < 100; i++)); do
		[ -e "$ready" ] || ! kill -0 "$sniffer" 2>/dev/null && break
		sleep 0.1
	done
	if [ ! -e "$ready" ]; then
		wait "$sniffer" || true
		# Without AF_PACKET (not root): a handshake of our own with the
		# right key, as its bytes went on the wire, stands in for it.
		echo "# cannot sniff ($(cat "$BATS_TEST_TMPDIR/sniff.out")): replaying a handshake of our own" >&3
		run python3 "$PEER" --port "$(peer_port "$LEADER")" --from "$C" --to "$LEADER" \
			handshake --key "$(key_file)" --record "$rec"
		[ "$status" -eq 0 ] || fail "the genuine handshake was refused: $output"
	else
		"$APUS_ROOT/scripts/fault.sh" kill --config "$CONF" --node "$C"
		"$APUS_ROOT/scripts/fault.sh" restart --config "$CONF" --node "$C" 3>&- >/dev/null
		wait "$sniffer" || fail "no handshake of node $C recorded: $(cat "$BATS_TEST_TMPDIR/sniff.out")"
		cat "$BATS_TEST_TMPDIR/sniff.out"
	fi
	wait_digests_equal "$CONF" 30
	mark=$(log_lines "$LEADER")
	commit=$(status_node "$(status_json)" "$LEADER" commit)
	run python3 "$PEER" --port "$(peer_port "$LEADER")" replay --record "$rec"
	echo "$output"
	[ "$status" -eq 0 ] || fail "the replayed handshake: $output"
	retry 20 0.2 log_since "$LEADER" "$mark" \
		"refused a peer connection from 127\.0\.0\.1:[0-9]+: claims to be node $C but does not know the cluster secret"
	assert_eq "$(status_node "$(status_json)" "$LEADER" role)/$(status_node "$(status_json)" "$LEADER" commit)" \
		"leader/$commit" "the leader's role and commit index after the replay"
	serving replay
	rss_bounded
}

@test "an admitted peer's frames past the region's end or into the control page are refused, not written, and it is dropped" {
	local j commit applied pid size off len name want mark base
	two_backups
	# Node B's region, written to by a peer that knows the key and claims
	# to be node C (from C's address: trusted by design, but only with
	# the log and C's own slots of the control page).
	j=$(status_json)
	commit=$(status_node "$j" "$B" commit)
	applied=$(status_node "$j" "$B" applied)
	pid=$(redis_pid "$B")
	size=$(offset size)
	base=(python3 "$PEER" --port "$(peer_port "$B")" --from "$C" --to "$B" frame --key "$(key_file)")
	# name offset length: past the end, wrapping, huge, across the page's
	# end, the node's own words, another node's slots.
	while read -r name off len; do
		mark=$(log_lines "$B")
		want=$(word_at "$B" "$off" 2>/dev/null) || want=
		run "${base[@]}" --off "$off" --len "$len" --wait 3
		echo "$name: $output"
		[ "$status" -eq 0 ] || fail "$name: node $B kept the connection after a frame it must refuse: $output"
		retry 20 0.2 log_since "$B" "$mark" \
			"tcp: node $C wrote (outside our region|$len bytes at offset $off, into our control page outside its own slots); dropping it" ||
			fail "$name: no log line"
		if [ "${#off}" -lt 15 ] && [ "$off" -lt "$size" ]; then
			assert_eq "$(word_at "$B" "$off")" "$want" "$name: the word at offset $off of node $B's region"
		fi
	done <<-EOF
		past-end $((size - 8)) 16
		at-end $size 8
		wrapping 18446744073709551608 16
		huge 4096 4294967295
		page-end 4088 16
		magic $(offset magic) 8
		durable-view $(offset dur.view) 8
		voted-view $(offset dur.voted_view) 8
		status-role $(offset status.role) 8
		guard-words $(offset ckpt.req) 8
		lead-slot-of-$LEADER $(offset other_lead "$C" "$LEADER") 8
		vote-of-$LEADER $(offset other_vote "$C" "$LEADER") 8
	EOF
	# What C may write lands (so the refusals above are the check, not a
	# tool that writes nothing): the unused word of its own lead slot.
	off=$(offset own_pad "$C")
	run "${base[@]}" --off "$off" --len 8 --fill 0x5a --wait 1
	echo "own slot: $output"
	assert_eq "$(word_at "$B" "$off")" 5a5a5a5a5a5a5a5a "C's own lead slot after its write"
	# The node is unharmed: same process, same role, its log untouched.
	assert_eq "$(redis_pid "$B")" "$pid" "node $B's pid"
	j=$(status_json)
	assert_eq "$(status_node "$j" "$B" role)" backup "node $B's role"
	assert_eq "$(status_node "$j" "$B" commit)/$(status_node "$j" "$B" applied)" "$commit/$applied" \
		"node $B's commit/applied after the hostile frames"
	serving frames
	rss_bounded
}

@test "a peer stalled mid-frame holds up neither the node's leader nor its clients" {
	local pid i
	two_backups
	pid=$(redis_pid "$B")
	# Admitted as C, it sends a frame's header and half of its 64 KiB into
	# the last bytes of B's log, then nothing.
	python3 "$PEER" --port "$(peer_port "$B")" --from "$C" --to "$B" stall --key "$(key_file)" \
		--off $(($(offset size) - 65536)) --len 65536 --seconds 20 \
		>"$BATS_TEST_TMPDIR/stall.out" 2>&1 3>&- &
	BG_PIDS=$!
	retry 50 0.1 grep -q stalling "$BATS_TEST_TMPDIR/stall.out"
	# B keeps taking the leader's entries and executing them meanwhile.
	for ((i = 0; i < 50; i++)); do
		echo "SET stall:$i v$i"
	done | timeout 20 redis-cli -h "$(leader_host)" -p "$(leader_port)" >/dev/null
	wait_equal_on_all_of "$B" v49 GET stall:49
	retry 50 0.1 caught_up "$B" || fail "node $B fell behind the leader during the stall"
	kill -0 "$BG_PIDS" 2>/dev/null || fail "the stalled peer is gone: $(cat "$BATS_TEST_TMPDIR/stall.out")"
	kill -KILL "$BG_PIDS"
	assert_eq "$(redis_pid "$B")" "$pid" "node $B's pid"
	serving stall
	rss_bounded
}

@test "handshakes stalled past the node's slots neither lock out a peer nor go unlogged" {
	local mark
	two_backups
	mark=$(log_lines "$LEADER")
	# 20 connections (the node has 16 slots for peers) that send half a
	# hello and wait.
	python3 - "$(peer_port "$LEADER")" "$BATS_TEST_TMPDIR/held" >"$BATS_TEST_TMPDIR/hold.out" 2>&1 3>&- <<-'EOF' &
		import socket, sys, time
		socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(20)]
		for s in socks:
		    s.sendall(b"SUPA\x02\x00")
		open(sys.argv[2], "w").close()
		time.sleep(30)
	EOF
	BG_PIDS=$!
	retry 50 0.1 test -e "$BATS_TEST_TMPDIR/held"
	sleep 0.5
	# A peer that knows the key gets in at once, not after the stalled
	# ones time out.
	run python3 "$PEER" --port "$(peer_port "$LEADER")" --from "$C" --to "$LEADER" \
		handshake --key "$(key_file)"
	echo "$output"
	assert_eq "$output" admitted "a genuine handshake while 20 stalled ones are held"
	retry 20 0.2 log_since "$LEADER" "$mark" \
		"refused a peer connection from 127\.0\.0\.1:[0-9]+: pushed out by a newer connection"
	kill -KILL "$BG_PIDS"
	serving stalledhello
	rss_bounded
}

@test "clients stalled on a guard's snapshot port keep it neither from its node nor unlogged" {
	local b pid i glog mark
	# A cluster of its own, with guards serving snapshots on guard_port.
	GCONF=$(APUS_TEST_NETNS='' APUS_TEST_TRANSPORT=tcp APUS_TEST_GUARD=on make_conf "$(test_dir guarded)" 19500)
	start_cluster "$GCONF"
	b=$(all_backups "$GCONF" | head -n 1) || fail "no backup"
	glog=$(data_dir "$b" "$GCONF")/apus.guard.log
	retry 100 0.1 grep -q "guarding node $b" "$glog"
	mark=$(wc -l <"$glog")
	# Six connections that send half a hello and wait (the guard's
	# backlog is four): an unauthenticated client must not hold it.
	python3 - "$(conf_node_get "$GCONF" "$b" guard_port)" "$BATS_TEST_TMPDIR/gheld" \
		>"$BATS_TEST_TMPDIR/ghold.out" 2>&1 3>&- <<-'EOF' &
		import socket, sys, time
		socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(6)]
		for s in socks:
		    s.sendall(b"APUSSNAP")
		open(sys.argv[2], "w").close()
		time.sleep(60)
	EOF
	BG_PIDS=$!
	retry 50 0.1 test -e "$BATS_TEST_TMPDIR/gheld"
	sleep 0.5
	# The node dies meanwhile: its guard brings it back within seconds.
	pid=$(redis_pid "$b" "$GCONF")
	kill -KILL "$pid"
	for ((i = 0; i < 100; i++)); do
		[ "$(status_node "$(status_json "$GCONF")" "$b" role)" = backup ] &&
			[ "$(redis_pid "$b" "$GCONF")" != "$pid" ] && break
		sleep 0.1
	done
	[ "$i" -lt 100 ] || {
		tail -n 5 "$glog"
		fail "node $b's guard did not bring it back within 10 s while clients stalled on its port"
	}
	retry 50 0.2 tail_has "$glog" "$mark" "refused a snapshot request from 127\.0\.0\.1:[0-9]+: no admission within"
	kill -KILL "$BG_PIDS"
	stop_cluster "$GCONF"
	GCONF=
}

@test "a client sending a 1 GB bulk string is refused by the server; the log takes little of it" {
	local j pos0 pos1 n marks=()
	j=$(status_json)
	pos0=$(status_node "$j" "$LEADER" log_pos)
	# Redis says why it refuses at loglevel verbose (into each node's
	# apus.log); the admin socket is not replicated, so each is told.
	for n in $(conf_nodes "$CONF"); do
		marks[n]=$(log_lines "$n")
		admin "$n" CONFIG SET loglevel verbose >/dev/null
	done
	run python3 "$CLIENT" --port "$(leader_port)" bulk --size 1073741824 --max 1073741824 --seconds 30
	echo "$output"
	[ "$status" -eq 0 ] || fail "the bulk client: $output"
	[[ "$output" == *"server closed"* ]] || fail "the server kept reading the 1 GB value: $output"
	[[ "$output" == *"Protocol error"* ]] || fail "no protocol error from the server: $output"
	j=$(status_json)
	pos1=$(status_node "$j" "$LEADER" log_pos)
	echo "log grew by $((pos1 - pos0)) bytes"
	[ $((pos1 - pos0)) -lt $((16 << 20)) ] || fail "the log took $((pos1 - pos0)) bytes of the refused value"
	# Every replica's server got the same bytes, and refused them alike.
	for n in $(conf_nodes "$CONF"); do
		retry 50 0.2 log_since "$n" "${marks[n]}" "Protocol error \(invalid bulk length\)" ||
			fail "node $n's server did not log the refusal"
		admin "$n" CONFIG SET loglevel notice >/dev/null
		assert_eq "$(admin "$n" EXISTS k)" 0 "key k on node $n"
	done
	serving bulk
	rss_bounded
}

# A soak of connections (make test-full); the other tests here hold hundreds.
# bats test_tags=soak
@test "thousands of connections one after another, then 2000 at once: no descriptor leaks" {
	local fd0=() n i
	for n in $(conf_nodes "$CONF"); do
		fd0[n]=$(fd_count "$(redis_pid "$n")")
	done
	# As many as 6 s allow (a loaded 2-core machine does a few thousand
	# a second, when it is not shared; the issue's 100k is a soak's).
	run python3 "$CLIENT" --port "$(leader_port)" churn --count 100000 --seconds 6 --every 100
	echo "$output"
	[ "$status" -eq 0 ] || fail "the churning client: $output"
	n=$(awk '{ print $1 }' <<<"$output")
	[ "$n" -ge 1000 ] || fail "only $n connections in 6 s"
	echo "# $n connections in sequence" >&3
	# 2000 at once (within ulimit -n), each answering PING; the cluster
	# serves while they are held.
	[ "$(ulimit -n)" -gt 2100 ] || skip "ulimit -n is $(ulimit -n): too low for 2000 connections"
	python3 "$CLIENT" --port "$(leader_port)" many --count 2000 --hold 2 \
		--hold-file "$BATS_TEST_TMPDIR/held" >"$BATS_TEST_TMPDIR/many.out" 2>&1 3>&- &
	BG_PIDS=$!
	retry 300 0.1 test -e "$BATS_TEST_TMPDIR/held"
	serving many
	wait "$BG_PIDS" || fail "2000 connections: $(cat "$BATS_TEST_TMPDIR/many.out")"
	cat "$BATS_TEST_TMPDIR/many.out"
	for n in $(conf_nodes "$CONF"); do
		fds_back "$n" "${fd0[n]}"
	done
	serving churn
	rss_bounded
}

@test "half-open clients, held or closed mid-request, and requests cut mid-way" {
	local fd0 n
	fd0=$(fd_count "$(redis_pid "$LEADER")")
	# 200 connections each holding half a SET.
	python3 "$CLIENT" --port "$(leader_port)" halfopen --count 200 --hold 60 \
		--ready "$BATS_TEST_TMPDIR/half" >"$BATS_TEST_TMPDIR/half.out" 2>&1 3>&- &
	BG_PIDS=$!
	retry 100 0.1 test -e "$BATS_TEST_TMPDIR/half"
	serving halfopen
	# Their process dies: the kernel closes them; so must every replica.
	kill -KILL "$BG_PIDS"
	fds_back "$LEADER" "$fd0"
	# Whole requests before a cut are executed everywhere, the cut one
	# nowhere: 50 closed with FIN, 50 with RST.
	run python3 "$CLIENT" --port "$(leader_port)" midclose --count 50
	[ "$status" -eq 0 ] || fail "$output"
	run python3 "$CLIENT" --port "$(leader_port)" midclose --count 50 --rst
	[ "$status" -eq 0 ] || fail "$output"
	wait_equal_on_all "$CONF" "done" GET mid:49
	for n in $(conf_nodes "$CONF"); do
		assert_eq "$(admin "$n" KEYS 'mid:*' | grep -c .)/$(admin "$n" KEYS 'half:*' | grep -c .)" 50/0 \
			"whole/cut requests executed on node $n"
	done
	serving midclose
	rss_bounded
}

@test "200 clients that vanish without a FIN or RST mid-request: every replica serves on" {
	# TCP_REPAIR closes a socket without telling the peer: the server
	# never learns they are gone.
	run python3 "$CLIENT" --port "$(leader_port)" halfopen --count 200 --vanish --hold 0
	echo "$output"
	[ "$status" -ne 77 ] || skip "$output"
	[ "$status" -eq 0 ] || fail "vanishing clients: $output"
	serving vanished
	rss_bounded
}
