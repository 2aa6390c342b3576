#!/usr/bin/env bats
# shellcheck disable=SC2154 # status and output are set by bats' run.
# Debian's unmodified clamd (ClamAV 1.4: one thread accepts and reads every
# connection with poll(), a pool of 4 scans and answers) under apus: the
# shipped apps/clamav/cluster-shm.conf (guard on, recovery points of the
# signature set) on ports 20901-20903 (this file's range is 20900-20999)
# with a 2 MB log, apps/clamav/workload.py as the load (INSTREAM scans
# from 20 clients, sessions among them), and the output checker as the
# judge: every replica must answer every connection byte for byte as the
# leader did.  apps/clamav/README.md says what works and what does not.
#
# A backup's clamd waits in poll(), not epoll: the shim reports a replay
# connection readable only on its turn (preload/poll.c).  Without that,
# clamd read bytes the shim refused (EAGAIN), took it for an error on the
# connection and dropped it: every scan's reply was missing on the
# backups.

load helpers

load clamav

@test "clamav: 20 clients of scans and sessions: every answer right, every replica answered as the leader" {
	workload --clients 20 --scans 25
	[ "$status" -eq 0 ] || fail "the workload saw wrong answers or failed connections"
	verify_all 2 || fail "apus verify: the replicas do not answer alike"
	no_divergence || fail "a backup's output differed from the leader's"
}

# The documented way to change signatures: the same files on every node,
# then RELOAD through the leader (a request of the log, so every replica
# reloads at the same point of it).
@test "clamav: a new signature file on every node and RELOAD at the leader: every replica finds it" {
	local n
	for n in $(conf_nodes "$CONF"); do
		cp "$CLAM_APP/signatures/update/apus-update.ndb" "$(data_dir "$n")/db/"
	done
	assert_eq "$(clam_ask "$(leader_host)" "$(leader_port)" RELOAD)" RELOADING "RELOAD"
	retry 50 0.2 clam_serving || fail "no answer after RELOAD"
	workload --clients 10 --scans 20 --update --seed 3
	[ "$status" -eq 0 ] || fail "the leader does not find the new signature"
	verify_all 2 || fail "apus verify: a backup did not load the new signature"
	grep -q 'Update' <<<"$output" || fail "the sweep did not find Apus.Test.Update"
	no_divergence || fail "a backup's output differed from the leader's"
}

# Twice: the load wraps the 2 MB log several times, then kill -9 of all
# three and apus start: every node comes back from its recovery point
# (snapshot.py's record of its signature set, checked by load.py), not
# from the log's first entry, and answers alike.
@test "clamav: kill -9 of all three after the log wrapped, then apus start, twice: a leader serves and every replica answers alike" {
	local r n marks=()
	for r in 1 2; do
		workload --clients 20 --scans 40 --update --seed $((3 + r))
		[ "$status" -eq 0 ] || fail "round $r: workload"
		verify_all 2 || fail "round $r: apus verify before the kill"
		marks=()
		for n in 0 1 2; do
			marks+=("$(wc -l <"$(data_dir "$n")/apus.log")")
		done
		kill_servers_and_guards
		start_cluster "$CONF"
		retry 150 0.2 clam_serving || fail "round $r: no leader serves after the restart"
		local from=0
		for n in 0 1 2; do
			tail -n +"$((marks[n] + 1))" "$(data_dir "$n")/apus.log" |
				grep -q 'starting from the recovery point' && from=$((from + 1))
		done
		[ "$from" -gt 0 ] || fail "round $r: no node started from a recovery point (did the log wrap?)"
		workload --clients 10 --scans 20 --update --seed $((5 + r))
		[ "$status" -eq 0 ] || fail "round $r: the workload after the restart"
		verify_all 2 || fail "round $r: apus verify after the restart"
	done
}

# CRIU works for clamd (slapd's does not: apps/openldap/README.md): a
# backup dumped by apus checkpoint and killed is restored from its image
# by its guard (the same pid, the signatures it had loaded) and answers the
# scans after it, the updated signature among them, as the leader does.
@test "clamav: a backup checkpointed with CRIU and then killed comes back from its image and answers alike" {
	requires_criu
	local b pid index snap
	b=$(backups | tail -n 1)
	workload --clients 10 --scans 10 --update --seed 8
	[ "$status" -eq 0 ] || fail "the workload before the checkpoint"
	# Entries past its recovery point (a PING is three): a restart takes
	# the newer of the two (guard/checkpoint.c), and this one is the image.
	clam_ask "$(leader_host)" "$(leader_port)" PING >/dev/null
	retry 150 0.2 node_applied_all "$b" || fail "node $b is not caught up"
	run timeout 120 "$APUS" checkpoint --config "$CONF" --node "$b" --json 3>&-
	[ "$status" -eq 0 ] || fail "apus checkpoint: $output"
	index=$(json_field "$(grep "^{" <<<"$output" | tr -d " ")" index)
	snap=$(status_node "$(status_json)" "$b" snapshot_index)
	[ "$index" -gt "$snap" ] || fail "the checkpoint (entry $index) is not past the recovery point (entry $snap)"
	pid=$(redis_pid "$b")
	kill -KILL "$pid"
	retry 150 0.2 grep -q "restored from checkpoint" "$(data_dir "$b")/apus.guard.log" ||
		fail "the guard did not restore node $b: $(tail -5 "$(data_dir "$b")/apus.guard.log")"
	assert_eq "$(redis_pid "$b")" "$pid" "the restored clamd's pid"
	workload --clients 10 --scans 20 --update --seed 9
	[ "$status" -eq 0 ] || fail "the workload after the restore"
	retry 150 0.2 node_applied_all "$b" || fail "node $b did not catch up after its restore"
	verify_all 2 || fail "apus verify after the restore"
	no_divergence || fail "a backup's output differed from the leader's"
}

# Last: the old leader is rebuilt by its guard from a peer's recovery point
# (snapshot_leader = off: a leader takes none).
@test "clamav: a failover (kill -9 of the leader's clamd): the new leader answers right, the old one comes back and answers alike" {
	local old new
	old=$(leader_id)
	kill -KILL "$(redis_pid "$old")"
	wait_new_leader_clam "$old"
	new=$NEW
	workload --clients 20 --scans 20 --update --seed 6
	[ "$status" -eq 0 ] || fail "the new leader (node $new) answered wrong"
	retry 150 0.2 node_applied_all "$old" || fail "node $old did not come back and catch up"
	verify_all 2 || fail "apus verify after the failover"
	no_divergence || fail "a backup's output differed from the leader's"
}
