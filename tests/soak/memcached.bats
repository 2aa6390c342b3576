#!/usr/bin/env bats
# shellcheck disable=SC2154 # status and output are set by bats' run.
# The memcached soak (make soak; issue 28): memcached as shipped (-t 4,
# thread_order = requests, the guard on with CRIU checkpoints every 2 s,
# backups' snapshots with snapshot.py and load.py, snapshot_leader = off)
# with a 1 MB log that wraps twice a round, an audited writer (audit.py,
# following the leader) running throughout, through rounds of kill -9 of
# every node (twice), apus stop + start of all, kill -9 of the leader and
# of a backup, and a leader paused (SIGSTOP) for 2 s.  After each round a
# leader must answer a set at its app port within 30 s (SOAK_SERVE_BOUND_S)
# of the fault (of
# the start, for stop + start); at the end every acknowledged set is on
# every replica and every replica's digest (digest.py --all, over its
# admin port) is the same.  SOAK_ROUNDS overrides the rounds.
# APUS_TEST_NETNS=tcp-netns: tcp, each replica in its own namespace.
# Ports 18760-18799: app 18761-18763, peers 18771-18773, guards
# 18781-18783, admin 18790-18792 (in namespaces: 18761, 18771, 18781 at
# each node's address, admin 1879<node>).

load ../bats/helpers
load faults

MC="$APUS_ROOT/apps/memcached"
PB=18760
# The bound on a leader's serving after each fault, in seconds
# (SOAK_SERVE_BOUND_S overrides it).
SERVE_BOUND=${SOAK_SERVE_BOUND_S:-30}

function setup() {
	if ! command -v memcached >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
		skip "test requires memcached (scripts/install-deps.sh) and python3"
	fi
	requires_criu
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
}

function teardown() {
	end_mc_writer
	keep_logs
	if [ -n "${OWN_CONF:-}" ]; then
		stop_cluster "$OWN_CONF"
		mc_kill_leftovers "$OWN_CONF"
		bash "$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$OWN_CONF")"
	fi
	OWN_CONF=
}

# soak_conf DIR LOG_SIZE - tests/bats/memcached.bats's mc_conf for this
# file's ports: make_conf's cluster (transport, namespaces, guard) with
# memcached -t 4 as shipped, an admin port 1879<node> at the node's address
# (not replicated), snapshot.py/load.py as recovery points; peers and
# guards moved into this file's range.
function soak_conf() {
	local dir=$1 conf cmd admin
	admin="--host {address} --port $(((PB + 30) / 10)){node}"
	conf=$(APUS_TEST_GUARD=on APUS_TEST_SNAPSHOTS=off APUS_TEST_METRICS='' APUS_TEST_SEED_FUNCTION='' make_conf "$dir" "$PB" "$2") || return 1
	cmd="memcached -p {port} -l {address}:{port},{address}:$(((PB + 30) / 10)){node} -U 0 -t 4 -u root -m 64 -c 1024"
	sed -i -e "/^thread_order/d" -e "s|^app_cmd .*|app_cmd      = $cmd\nthread_order = requests|" "$conf"
	sed -i -e "s|^app_cmd .*|&\nsnapshot_cmd = $MC/snapshot.py $admin --out {data_dir}/memcached.snap\nsnapshot_file = memcached.snap\nsnapshot_leader = off\nsnapshot_load_cmd = $MC/load.py $admin --in {data_dir}/memcached.snap|" "$conf"
	sed -i "s/^guard .*/&\ncheckpoint_interval_s = 2/" "$conf"
	awk '/^peer_port *=/ { sub(/[0-9]+$/, $NF - 40) } /^guard_port *=/ { sub(/[0-9]+$/, $NF - 50) } 1' \
		"$conf" >"$conf.new" && mv "$conf.new" "$conf"
	grep -q "^app_cmd      = memcached " "$conf" && grep -q "^snapshot_load_cmd = " "$conf" &&
		grep -q "^checkpoint_interval_s = 2" "$conf" &&
		! awk -F'= *' '/_port *=/ && ($2 < 18760 || $2 > 18799) { bad = 1 } END { exit !bad }' "$conf" || return 1
	echo "$conf"
}

function mc_admin_port() { echo $((PB + 30 + $1)); }

# mc_kill_leftovers CONF - memcached processes still listening on CONF's
# app or admin ports (an aborted earlier run of this file).
function mc_kill_leftovers() {
	local conf=$1 n port ns in pid
	[ -f "$conf" ] || return 0
	for n in $(conf_nodes "$conf"); do
		ns=$(conf_node_get "$conf" "$n" netns)
		in=()
		[ -n "$ns" ] && in=(ip netns exec "$ns")
		for port in "$(conf_node_get "$conf" "$n" app_port)" "$(mc_admin_port "$n")"; do
			for pid in $("${in[@]}" ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
				[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = memcached ] && kill -KILL "$pid" 2>/dev/null
			done
		done
	done
	return 0
}

# mc_req HOST PORT CMD - one text-protocol request ("\r\n" in CMD sent as
# CRLF), its first reply line.
function mc_req() {
	timeout 10 python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from workload import Conn
c = Conn(sys.argv[2], int(sys.argv[3]), timeout=5)
c.send(sys.argv[4].replace("\\r\\n", "\r\n").encode() + b"\r\n")
print(c.line())' "$MC" "$1" "$2" "$3" 2>&1
}

# mc_serving_leader - the leader per apus status answers a set (a request
# that goes through the log) at its app port.
function mc_serving_leader() {
	local id
	id=$(leader_id) || return 1
	[ -n "$id" ] && [ "$id" != null ] || return 1
	[ "$(mc_req "$(node_host "$id")" "$(app_port "$id")" 'set soak:probe 0 0 2\r\nok')" = STORED ]
}

# mc_serving_all - a leader serves and every node is a recoverable backup
# or the leader again.
function mc_serving_all() {
	local j n
	mc_serving_leader || return 1
	all_backups >/dev/null 2>&1 || return 1
	j=$(status_json) || return 1
	for n in $(conf_nodes "$CONF"); do
		[ "$(status_node "$j" "$n" recoverable)" = true ] || return 1
	done
}

# start_mc_writer - an audit.py writer (a set and an incr at a time,
# following the leader; prefix w<k>, log $WDIR/w<k>.log) until
# end_mc_writer; a new one should one end early.
function start_mc_writer() {
	WDIR="$BATS_TEST_TMPDIR/writer"
	mkdir -p "$WDIR"
	(
		k=0
		while [ ! -e "$WDIR/stop" ]; do
			k=$((k + 1))
			echo "$k" >"$WDIR/current"
			APUS_BIN="$APUS" timeout 900 python3 "$MC/audit.py" write --config "$CONF" \
				--log "$WDIR/w$k.log" --prefix "w$k" --count 1000000 --pause-ms 2 >>"$WDIR/out" 2>&1
		done
	) 3>&- &
	WPID=$!
}

# end_mc_writer - the writer ends now (SIGTERM through timeout).  The
# request it was waiting on may yet have happened: its log counts one incr
# more as attempted (audit.py check's upper bound on the counter).
function end_mc_writer() {
	[ -n "${WPID:-}" ] || return 0
	touch "$WDIR/stop"
	pkill -TERM -P "$WPID" 2>/dev/null || true
	wait_pids_gone 10 "$WPID" || kill -KILL "$WPID" 2>/dev/null
	wait "$WPID" 2>/dev/null || true
	WPID=
	echo "fail incr (the writer was ended)" >>"$WDIR/w$(cat "$WDIR/current").log"
	return 0
}

# audit_node NODE - every writer log's acknowledged sets on NODE.
function audit_node() {
	local n=$1 l out
	for l in "$WDIR"/w*.log; do
		out=$(timeout 120 python3 "$MC/audit.py" check --host "$(node_host "$n")" \
			--port "$(mc_admin_port "$n")" --log "$l" --prefix "$(basename "$l" .log)" 2>&1) || {
			echo "node $n, $(basename "$l"): $out"
			return 1
		}
	done
}

function mc_digests() {
	local n
	for n in $(conf_nodes "$CONF"); do
		echo "$n $(timeout 60 python3 "$MC/digest.py" --host "$(node_host "$n")" --port "$(mc_admin_port "$n")" --all 2>&1)"
	done
}

# mc_digests_equal - every node's digest.py --all is one well-formed digest.
function mc_digests_equal() {
	local d
	d=$(mc_digests | cut -d' ' -f2- | sort -u)
	[[ "$d" =~ ^[0-9a-f]{64}\ [0-9]+$ ]]
}

@test "memcached as shipped, 1 MB log: kill -9 of all (twice), stop/start of all, kill -9 of a leader and a backup, pause of a leader: every acknowledged set on every replica, digests equal, a leader serves within 30 s each time" {
	OWN_CONF=$(soak_conf "$(test_dir own$PB)" 1M) || fail "soak_conf failed"
	CONF=$OWN_CONF
	mc_kill_leftovers "$CONF"
	start_cluster "$CONF"
	local round n p t0 fill tstart=$SECONDS k=0 lg="$APUS_ROOT/build/bench/loadgen" acked=0 l pos0 pos times=""
	[ -x "$lg" ] || fail "loadgen not built at $lg (run make)"
	pos0=$(max_log_pos)
	start_mc_writer
	local rounds=${SOAK_ROUNDS:-kill-all stop-start kill-leader kill-all pause-leader kill-backup}
	for round in $rounds; do
		sleep 3
		t0=$SECONDS
		# Fill the log between faults: 8,000 sets of 100 bytes (~2 MB of
		# log), twice what the 1 MB log holds.
		run timeout 120 "$lg" --proto memcached --host "$(leader_host)" --port "$(leader_port)" \
			--op set --clients 20 --requests 8000 --keyspace 5000 --key-prefix fill --size 100 --seed "$((++k))"
		[ "$status" -eq 0 ] || fail "$round: the fill failed (exit $status): $output; $(status_json); $(show_logs "$CONF" 15)"
		fill=$((SECONDS - t0))
		t0=$SECONDS
		inject "$round"
		sleep 0.5
		until mc_serving_leader; do
			[ $((SECONDS - t0)) -lt "$SERVE_BOUND" ] ||
				fail "$round: no leader serves after $((SECONDS - t0)) s: $(status_json); $(show_logs "$CONF" 15)"
			sleep 0.2
		done
		echo "# $round: a leader serves after $((SECONDS - t0)) s (fill $fill s; at $((SECONDS - tstart)) s)" >&3
		times+=" $round=$((SECONDS - t0))s"
		[ $((SECONDS - t0)) -le "$SERVE_BOUND" ] || fail "$round: the leader served after more than $SERVE_BOUND s"
	done
	end_mc_writer
	tail -n 5 "$WDIR/out" 2>/dev/null || true
	for l in "$WDIR"/w*.log; do
		acked=$((acked + $(grep -c '^set ' "$l")))
	done
	echo "# audited writer: $acked sets acknowledged ($(cat "$WDIR"/w*.log | grep -c '^fail') requests failed; $(cat "$WDIR/current") writer run(s))" >&3
	[ "$acked" -ge $((100 * $(wc -w <<<"$rounds"))) ] || fail "only $acked sets acknowledged"
	# Every node back (an old leader rebuilt from a peer by its guard).
	t0=$SECONDS
	retry 600 0.2 mc_serving_all || fail "not every node is back: $(status_json); $(show_logs "$CONF" 15)"
	echo "# every node back $((SECONDS - t0)) s after the rounds" >&3
	pos=$(max_log_pos)
	echo "# log: $((pos - pos0)) bytes written, $(((pos - pos0) >> 20)) times its 1 MB (log_pos $pos0 -> $pos)" >&3
	# Each round's fill alone is more than the log holds.
	[ $((pos - pos0)) -gt $(($(wc -w <<<"$rounds") << 20)) ] || fail "the log wrapped fewer times than there were rounds"
	for n in $(conf_nodes "$CONF"); do
		retry 30 1 audit_node "$n" || fail "after the rounds: $output"
		echo "# node $n: every acknowledged set present" >&3
	done
	retry 60 1 mc_digests_equal || fail "replicas differ: $(mc_digests)"
	mc_digests | sed 's/^/# digest of node /' >&3
	echo "# serve times:$times; done at $((SECONDS - tstart)) s" >&3
	for n in $(conf_nodes "$CONF"); do
		! grep -q "stepping down from view" "$(data_dir "$n")/apus.log" ||
			echo "# node $n stepped down as a leader that could not execute its log (allowed, said)" >&3
	done
}
