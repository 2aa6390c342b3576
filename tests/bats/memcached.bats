#!/usr/bin/env bats
# shellcheck disable=SC2154 # status and output are set by bats' run.
# memcached 1.6 (Debian's), a multi-threaded server (-t 4: four worker
# threads, each with its own epoll loop, and a thread that accepts), under
# apus (issue 18): every replica ends with the same data after mixed
# traffic from 50 connections; two connections incrementing one key end
# equal everywhere; a kill -9 of the leader loses nothing acknowledged.
# Replicas are read over each memcached's second listener, an admin port
# that is not replicated (apps/memcached/digest.py).
#
# APUS_TEST_MC_THREADS: memcached's -t (default 4); APUS_TEST_THREAD_ORDER:
# thread_order (default requests, as apps/memcached's configs); with
# APUS_TEST_NETNS=1 over tcp, each replica in a network namespace.

load helpers

MC="$APUS_ROOT/apps/memcached"
FAULT="$APUS_ROOT/scripts/fault.sh"
MC_THREADS="${APUS_TEST_MC_THREADS:-4}"
# The shipped configs' thread_order (doc/operator-guide.md,
# "Multi-threaded servers").
MC_THREAD_ORDER="${APUS_TEST_THREAD_ORDER:-requests}"
# Ports of this file: 19900-19999 (helpers.bash: app PORTBASE+1+i, peers
# PORTBASE+51+i; here the admin ports PORTBASE+30+i, a bare memcached on
# PORTBASE+90).
PORTBASE=19900
KEYS=1000

function have_memcached() {
	command -v memcached >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1
}

# mc_conf DIR PORTBASE [LOG_SIZE] - make_conf's cluster (its transport,
# namespaces, fsync, guard and so on) with memcached as the server: the app
# port, an admin port PORTBASE+30+node at the node's address (not
# replicated), and recovery points as apps/memcached's configs take them
# (snapshot.py on held backups, load.py at start; snapshot_leader = off).
# PORTBASE must be a multiple of 10 (the admin port is written as a prefix
# and {node}).
function mc_conf() {
	local dir=$1 pb=$2 conf cmd admin
	admin="--host {address} --port $(((pb + 30) / 10)){node}"
	conf=$(APUS_TEST_SNAPSHOTS=off make_conf "$dir" "$pb" "${3:-64M}") || return 1
	cmd="memcached -p {port} -l {address}:{port},{address}:$(((pb + 30) / 10)){node} -U 0 -t $MC_THREADS -u root -m 64"
	sed -i -e "/^thread_order/d" -e "s|^app_cmd .*|app_cmd      = $cmd\nthread_order = $MC_THREAD_ORDER|" "$conf"
	sed -i -e "s|^app_cmd .*|&\nsnapshot_cmd = $MC/snapshot.py $admin --out {data_dir}/memcached.snap\nsnapshot_file = memcached.snap\nsnapshot_leader = off\nsnapshot_load_cmd = $MC/load.py $admin --in {data_dir}/memcached.snap|" "$conf"
	grep -q "^app_cmd      = memcached " "$conf" && grep -q "^snapshot_load_cmd = " "$conf" || return 1
	echo "$conf"
}

# mc_admin_port NODE - NODE's admin port (of the cluster at MC_PORTBASE,
# default the file's).
function mc_admin_port() { echo $((${MC_PORTBASE:-$PORTBASE} + 30 + $1)); }

# mc_kill_leftovers CONF - kill memcached processes still listening on the
# app or admin ports of CONF (an aborted earlier run of this file).
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

# mc_addr NODE|HOST:PORT - "HOST PORT": as given, or NODE's admin port.
function mc_addr() {
	if [[ "$1" == *:* ]]; then
		echo "${1%:*} ${1##*:}"
	else
		echo "$(node_host "$1") $(mc_admin_port "$1")"
	fi
}

# mc NODE|HOST:PORT CMD - send one text-protocol request (\r\n is added;
# "\r\n" inside CMD is sent as CRLF) and print the first reply line.  A
# node number means its admin port.
function mc() {
	local host port
	read -r host port <<<"$(mc_addr "$1")"
	timeout 30 python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from workload import Conn
c = Conn(sys.argv[2], int(sys.argv[3]))
c.send(sys.argv[4].replace("\\r\\n", "\r\n").encode() + b"\r\n")
print(c.line())' "$MC" "$host" "$port" "$2"
}

# mc_get NODE|HOST:PORT KEY - KEY's value on NODE (admin port), or "(none)".
function mc_get() {
	local host port
	read -r host port <<<"$(mc_addr "$1")"
	timeout 30 python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from workload import Conn
c = Conn(sys.argv[2], int(sys.argv[3]))
v = c.get_multi([sys.argv[4]]).get(sys.argv[4])
print("(none)" if v is None else v[1].decode("latin-1"))' "$MC" "$host" "$port" "$2"
}

# mc_digest NODE [DIGEST ARGS...] - "sha256 keys" of NODE's data.
function mc_digest() {
	local n=$1
	shift
	timeout 60 python3 "$MC/digest.py" --host "$(node_host "$n")" --port "$(mc_admin_port "$n")" "$@" 2>&1
}

# mc_digests_equal "NODES" [DIGEST ARGS...] - every node of NODES gave the same digest.
function mc_digests_equal() {
	local nodes=$1 n d first=""
	shift
	for n in $nodes; do
		d=$(mc_digest "$n" "$@") || return 1
		[[ "$d" =~ ^[0-9a-f]{64}\ [0-9]+$ ]] || return 1
		[ -z "$first" ] && first=$d
		[ "$d" = "$first" ] || return 1
	done
	[ -n "$first" ]
}

# mc_wait SECONDS CHECK SHOW ARGS... - run CHECK ARGS every 0.5 s until it
# succeeds; after SECONDS, SHOW ARGS (what each node holds), apus status and
# the logs, and fail.
function mc_wait() {
	local deadline=$((SECONDS + $1)) check=$2 show=$3
	shift 3
	until "$check" "$@"; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			"$show" "$@" >&2
			"$APUS" status --config "$CONF" >&2 3>&- || true
			show_logs "$CONF" 10 >&2
			return 1
		fi
		sleep 0.5
	done
}

function mc_digests_show() {
	local nodes=$1 n
	shift
	echo "replicas differ after the wait (node: sha256 keys):"
	for n in $nodes; do echo "  node $n: $(mc_digest "$n" "$@")"; done
}

# wait_mc_digests_equal "NODES" TIMEOUT [DIGEST ARGS...] - wait until every
# node of NODES has the same digest; on timeout show each and the logs.
function wait_mc_digests_equal() {
	local nodes=$1 timeout=$2
	shift 2
	mc_wait "$timeout" mc_digests_equal mc_digests_show "$nodes" "$@"
}

# mc_values_are "NODES" KEY WANT - KEY is WANT on each of NODES.
function mc_values_are() {
	local n
	for n in $1; do
		[ "$(mc_get "$n" "$2")" = "$3" ] || return 1
	done
}

function mc_values_show() {
	local n
	for n in $1; do echo "  node $n: $2 = '$(mc_get "$n" "$2")', want '$3'"; done
}

# wait_mc_value "NODES" KEY WANT - wait (30 s) until KEY is WANT on each of NODES.
function wait_mc_value() {
	mc_wait 30 mc_values_are mc_values_show "$1" "$2" "$3"
}

# mc_wait_new_leader OLD - wait (15 s) until a node other than OLD leads
# and answers at its app port; its id in NEW.
function mc_wait_new_leader() {
	local i
	for ((i = 0; i < 150; i++)); do
		NEW=$(leader_id 2>/dev/null) || NEW=
		if [ -n "$NEW" ] && [ "$NEW" != "$1" ] &&
			[[ "$(mc "$(node_host "$NEW"):$(app_port "$NEW")" version 2>&1)" == VERSION* ]]; then
			return 0
		fi
		sleep 0.1
	done
	"$APUS" status --config "$CONF" >&2 3>&- || true
	show_logs "$CONF" 20 >&2
	fail "no new leader after 15 s (old: $1)"
}

function others() {
	local n
	for n in $(conf_nodes "$CONF"); do [ "$n" != "$1" ] && echo "$n"; done
	return 0
}

function setup_file() {
	have_memcached || return 0
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		have netns || return 0
	fi
	CONF=$(mc_conf "$(test_dir cluster)" "$PORTBASE")
	export CONF
	mc_kill_leftovers "$CONF"
	start_cluster "$CONF"
}

function teardown_file() {
	[ -n "${CONF:-}" ] || return 0
	stop_cluster "$CONF"
	mc_kill_leftovers "$CONF"
	# A stopped node keeps its region (log_size of memory) for a restart.
	bash "$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$CONF")"
}

function teardown() {
	if [ -n "${OWN_CONF:-}" ]; then
		stop_cluster "$OWN_CONF"
		mc_kill_leftovers "$OWN_CONF"
		bash "$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$OWN_CONF")"
		OWN_CONF= MC_PORTBASE=
	fi
	if [ -n "${BARE_PID:-}" ]; then
		kill -KILL "$BARE_PID" 2>/dev/null || true
		wait "$BARE_PID" 2>/dev/null || true
		BARE_PID=
	fi
}

function setup() {
	have_memcached || skip "test requires memcached (Debian's memcached: scripts/install-deps.sh) and python3"
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
}

@test "every replica runs memcached with $MC_THREADS worker threads (thread_order = $MC_THREAD_ORDER)" {
	local n
	for n in $(conf_nodes "$CONF"); do
		run mc "$n" "stats settings"
		# The first line of the settings; the thread count is read below.
		[[ "$output" == STAT* ]] || fail "node $n: stats settings: $output"
		run timeout 30 python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from workload import Conn
c = Conn(sys.argv[2], int(sys.argv[3]))
c.send(b"stats settings\r\n")
while True:
    l = c.line()
    if l == "END": break
    if l.startswith("STAT num_threads "): print(l.split()[2])' "$MC" "$(node_host "$n")" "$(mc_admin_port "$n")"
		assert_eq "$output" "$MC_THREADS" "node $n num_threads"
	done
}

# Tests of this file share one cluster: each writes and compares keys of its
# own (a prefix of its own), so that one's divergence does not fail the next.

@test "50 connections of mixed set/get/incr/decr/append/prepend/delete/add: every replica ends with the same data" {
	local leader d keys
	run timeout 300 python3 "$MC/workload.py" --host "$(leader_host)" --port "$(leader_port)" \
		--conns 50 --ops 400 --keys "$KEYS" --seed mixed
	echo "$output"
	assert_eq "$status" 0 "workload.py exit status"
	leader=$(leader_id)
	d=$(mc_digest "$leader" --keys "$KEYS")
	keys=${d##* }
	# ~70% of the key space is present after 20,000 random operations.
	[[ "$keys" =~ ^[0-9]+$ ]] && [ "$keys" -gt $((KEYS / 2)) ] ||
		fail "the leader holds only '$keys' of $KEYS keys after the workload ($d)"
	# Every key the servers hold, whatever its name (lru_crawler metadump).
	wait_mc_digests_equal "$(conf_nodes "$CONF")" 30 --all
	# And the same through the workload's key space.
	mc_digests_equal "$(conf_nodes "$CONF")" --keys "$KEYS" || fail "digests of the key space differ"
}

@test "CAS values (gets) of the mixed workload's items are the same on every replica" {
	# memcached numbers each store from one counter: the same stores in
	# the same order give the same CAS values.
	wait_mc_digests_equal "$(conf_nodes "$CONF")" 30 --keys "$KEYS" --cas
}

@test "apus verify: every replica answers a sweep of the key space as the leader does; one changed behind apus's back is named" {
	local leader b line flags val
	# (retried: on these loaded cores a spurious election can leave no
	# leader for a moment, and verify needs one)
	retry 10 1 "$APUS" verify --config "$CONF" --cmd "$MC/verify.txt"
	echo "$output"
	assert_eq "$status" 0 "apus verify after the workload"
	leader=$(leader_id)
	b=$(others "$leader" | head -1)
	# A write on a backup's admin port is not replicated: it now differs.
	mc "$b" 'set key:7 0 0 5\r\nXXXXX' >/dev/null
	run "$APUS" verify --config "$CONF" --cmd "$MC/verify.txt"
	echo "$output"
	assert_eq "$status" 1 "apus verify with node $b changed"
	[[ "$output" == *"node $b: DIFFERS"* ]] || fail "node $b not named"
	# Back as the leader has it (flags too), for the tests after this one.
	line=$(mc "$leader" 'get key:7')
	if [[ "$line" == VALUE* ]]; then
		flags=$(awk '{print $3}' <<<"$line")
		val=$(mc_get "$leader" key:7)
		mc "$b" "set key:7 $flags 0 ${#val}\r\n$val" >/dev/null
	else
		mc "$b" 'delete key:7' >/dev/null
	fi
	retry 10 1 "$APUS" verify --config "$CONF" --cmd "$MC/verify.txt"
	echo "$output"
	assert_eq "$status" 0 "apus verify once node $b is put back"
}

@test "two connections incrementing one key 2,000 times each: 4,000 on every replica" {
	local n=2000 host port r
	host=$(leader_host) port=$(leader_port)
	r=$(mc "$host:$port" 'set shared:0 0 0 1\r\n0')
	assert_eq "$r" STORED "set shared:0"
	run timeout 300 python3 "$MC/workload.py" --host "$host" --port "$port" \
		--conns 2 --ops "$n" --keys 1 --prefix shared --mix incr --delta 1 --seed two
	echo "$output"
	assert_eq "$status" 0 "workload.py exit status"
	assert_eq "$(mc_get "$(leader_id)" shared:0)" $((2 * n)) "shared:0 on the leader"
	wait_mc_value "$(conf_nodes "$CONF")" shared:0 $((2 * n))
	wait_mc_digests_equal "$(conf_nodes "$CONF")" 30 --prefix shared --keys 1
}

@test "loadgen --proto memcached (the benchmark's client): every request counted, error replies are errors" {
	local port=$((PORTBASE + 90)) lg="$APUS_ROOT/build/bench/loadgen"
	[ -x "$lg" ] || fail "loadgen not built at $lg (run make)"
	# A bare memcached of this test's own (killed by teardown).
	memcached -p "$port" -l "127.0.0.1:$port" -U 0 -t 4 -u root 3>&- &
	BARE_PID=$!
	retry 50 0.1 mc "127.0.0.1:$port" version
	run "$lg" --proto memcached --host 127.0.0.1 --port "$port" --op set --clients 10 --requests 2000 --keyspace 100 --size 100
	echo "$output"
	assert_eq "$status" 0 "loadgen set"
	[[ "$output" == *" n=2000 "*" errors=0 "* ]] || fail "loadgen set: $output"
	[ "$(mc_get "127.0.0.1:$port" key:7 | wc -c)" -eq 101 ] || fail "key:7 after the sets: '$(mc_get "127.0.0.1:$port" key:7)'"
	run "$lg" --proto memcached --host 127.0.0.1 --port "$port" --op get --clients 10 --requests 2000 --keyspace 200
	echo "$output"
	assert_eq "$status" 0 "loadgen get (hits and misses)"
	[[ "$output" == *" n=2000 "*" errors=0 "* ]] || fail "loadgen get: $output"
	# Larger than memcached's 1 MB items: SERVER_ERROR object too large.
	run "$lg" --proto memcached --host 127.0.0.1 --port "$port" --op set --clients 1 --requests 5 --size 2000000
	echo "$output"
	assert_eq "$status" 1 "loadgen of sets that fail"
	[[ "$output" == *" errors=5 "* ]] || fail "loadgen: $output"
}

@test "loadgen sets and gets through the leader (50 clients): every replica ends with the same data" {
	local lg="$APUS_ROOT/build/bench/loadgen" op
	for op in set get; do
		run timeout 300 "$lg" --proto memcached --host "$(leader_host)" --port "$(leader_port)" \
			--op "$op" --clients 50 --requests 20000 --keyspace 5000 --key-prefix lg --size 100 --seed 7
		echo "$output"
		assert_eq "$status" 0 "loadgen $op"
	done
	wait_mc_digests_equal "$(conf_nodes "$CONF")" 30 --prefix lg --keys 5000
}

@test "kill -9 the leader's memcached under an audited writer: a new leader serves, nothing acknowledged is lost" {
	local log="$BATS_TEST_TMPDIR/failover.log" old writer n sets
	old=$(leader_id)
	APUS_BIN="$APUS" python3 "$MC/audit.py" write --config "$CONF" --log "$log" \
		--count 600 --pause-ms 5 --prefix fo 3>&- &
	writer=$!
	# Background traffic on other keys, so that several worker threads of
	# the leader run at the kill (its connections break then: its exit
	# status is not looked at).
	timeout 60 python3 "$MC/workload.py" --host "$(leader_host)" --port "$(leader_port)" \
		--conns 8 --ops 0 --duration 3 --keys "$KEYS" --prefix fobg --seed failover >/dev/null 2>&1 3>&- &
	local load=$!
	# The kill comes while the writer is under way (100 of its 600 sets
	# acknowledged), however slow the machine.
	retry 300 0.05 eval '[ "$(grep -c "^set " "$log" 2>/dev/null)" -ge 100 ]' ||
		fail "the writer acknowledged fewer than 100 sets in 15 s: $(tail -n 3 "$log")"
	"$FAULT" kill --config "$CONF" --node "$old"
	# Recorded now: the tests after this one restart it, whatever fails here.
	echo "$old" >"$BATS_FILE_TMPDIR/killed"
	mc_wait_new_leader "$old"
	wait "$writer" || fail "audit.py write failed"
	wait "$load" || true
	# The kill broke the writer's connection, and writes went on after
	# the failover, not only before it.
	grep -q '^fail' "$log" || fail "the writer saw no failure: did the kill come after it ended?"
	sets=$(sed -n '/^fail/,$p' "$log" | grep -c '^set ' || true)
	[ "$sets" -gt 100 ] || fail "only $sets writes acknowledged after the failover ($(grep '^fail' "$log" | head -3))"
	for n in $(others "$old"); do
		run timeout 120 python3 "$MC/audit.py" check --host "$(node_host "$n")" \
			--port "$(mc_admin_port "$n")" --log "$log" --prefix fo
		echo "node $n: $output"
		assert_eq "$status" 0 "audit on node $n"
	done
	wait_mc_digests_equal "$(others "$old")" 30 --prefix fobg --keys "$KEYS"
	wait_mc_digests_equal "$(others "$old")" 30 --prefix fo --keys 601 --key fo:ctr
	grep -q "serving clients as leader of view" "$(data_dir "$NEW")/apus.log" || fail "node $NEW never served"
}

@test "the killed leader restarts and catches up the whole log: every replica equal" {
	local old
	old=$(cat "$BATS_FILE_TMPDIR/killed")
	# The old leader comes back as a backup: with no snapshot it executes
	# the log from its start (the whole history fits in the log here).
	"$FAULT" restart --config "$CONF" --node "$old" 3>&-
	wait_mc_digests_equal "$(conf_nodes "$CONF")" 60 --prefix fobg --keys "$KEYS"
	wait_mc_digests_equal "$(conf_nodes "$CONF")" 30 --prefix fo --keys 601 --key fo:ctr
	assert_eq "$(status_node "$(status_json)" "$old" role)" backup "role of the restarted node"
	rm -f "$BATS_FILE_TMPDIR/killed"
}

# Each test above compares its own keys; this compares everything the
# servers hold, whatever its name, after all of them.
@test "at the end: every live replica holds the same items (all keys, lru_crawler metadump)" {
	local nodes
	nodes=$(conf_nodes "$CONF")
	# The leader killed above stays down unless its restart test ran.
	[ -f "$BATS_FILE_TMPDIR/killed" ] && nodes=$(others "$(cat "$BATS_FILE_TMPDIR/killed")")
	wait_mc_digests_equal "$nodes" 30 --all
}

# mc_audit_all LOG PREFIX - every node of $CONF holds every set LOG
# acknowledged (audit.py check over its admin port).
function mc_audit_all() {
	local n out
	for n in $(conf_nodes "$CONF"); do
		out=$(timeout 120 python3 "$MC/audit.py" check --host "$(node_host "$n")" \
			--port "$(mc_admin_port "$n")" --log "$1" --prefix "$2" 2>&1) || {
			echo "node $n: $out"
			return 1
		}
	done
}

# mc_serving_leader - a leader answers version at its app port.
function mc_serving_leader() {
	local id
	id=$(leader_id) || return 1
	[ -n "$id" ] && [ "$id" != null ] || return 1
	[[ "$(mc "$(node_host "$id"):$(app_port "$id")" version 2>&1)" == VERSION* ]]
}

# mc_serving_all - a leader serves, and every node is a recoverable
# member again (an old leader rebuilt by its guard, too).
function mc_serving_all() {
	local j n
	mc_serving_leader || return 1
	all_backups >/dev/null 2>&1 || return 1
	j=$(status_json) || return 1
	for n in $(conf_nodes "$CONF"); do
		[ "$(status_node "$j" "$n" recoverable)" = true ] || return 1
	done
}

# mc_write LOG PREFIX COUNT - COUNT audited sets through whoever leads.
function mc_write() {
	APUS_BIN="$APUS" timeout 300 python3 "$MC/audit.py" write --config "$CONF" --log "$1" \
		--prefix "$2" --count "$3" >/dev/null 2>&1 3>&- || fail "audit.py write $2 failed"
	[ "$(grep -c '^set ' "$1")" -gt $(($3 / 2)) ] || fail "only $(grep -c '^set ' "$1") of $3 sets acknowledged"
}

@test "memcached as shipped (guard on, backups' snapshots, a 1 MB log that wraps): kill -9 of all, stop and start of all, kill -9 of all again, a deleted data directory: every acknowledged write on every replica" {
	OWN_CONF=$(APUS_TEST_GUARD=on mc_conf "$(test_dir own20400)" 20400 1M)
	# CRIU images too (where CRIU works), taken often: the newest of an
	# image and a snapshot is the one a restart uses.
	sed -i "s/^guard .*/&\ncheckpoint_interval_s = 3/" "$OWN_CONF"
	CONF=$OWN_CONF
	MC_PORTBASE=20400
	mc_kill_leftovers "$CONF"
	start_cluster "$CONF"
	local one="$BATS_TEST_TMPDIR/one.log" two="$BATS_TEST_TMPDIR/two.log" j lead n t0 victim
	# ~16,000 entries of ~90 bytes: more than the 1 MB log holds.
	mc_write "$one" one 8000
	lead=$(leader_id)
	j=$(status_json)
	[ "$(status_node "$j" "$lead" log_pos)" -gt $((1 << 20)) ] ||
		fail "the log did not wrap: $j"
	for n in $(backups); do
		[ "$(status_node "$j" "$n" recovery_point)" = snapshot ] ||
			[ "$(status_node "$j" "$n" recovery_point)" = checkpoint ] ||
			fail "backup $n has no recovery point: $j"
	done

	# kill -9 of every server: the guards bring them back (the old leader,
	# whose state no recovery point of its own holds, from a peer's).
	for n in $(conf_nodes "$CONF"); do
		kill -KILL "$(redis_pid "$n")" 2>/dev/null || true
	done
	t0=$SECONDS
	retry 600 0.1 mc_serving_leader || fail "no leader serves after kill -9 of all: $(status_json); $(show_logs "$CONF" 15)"
	echo "kill -9 of all: a leader serves after $((SECONDS - t0)) s"
	retry 600 0.1 mc_serving_all || fail "not every node is back: $(status_json); $(show_logs "$CONF" 15)"
	retry 20 1 mc_audit_all "$one" one || fail "after kill -9 of all: $(mc_audit_all "$one" one)"

	# More writes (the log wraps again), then apus stop and start of all.
	mc_write "$two" two 4000
	run timeout 60 "$APUS" stop --config "$CONF" 3>&-
	assert_eq "$status" 0 "apus stop: $output"
	run timeout 120 "$APUS" start --config "$CONF" 3>&-
	assert_eq "$status" 0 "apus start: $output"
	retry 600 0.1 mc_serving_all || fail "not every node is back after start: $(status_json); $(show_logs "$CONF" 15)"
	retry 20 1 mc_audit_all "$one" one || fail "after stop/start: $(mc_audit_all "$one" one)"
	retry 20 1 mc_audit_all "$two" two || fail "after stop/start: $(mc_audit_all "$two" two)"

	# kill -9 of every server again, now that another node may lead: a
	# leader serves (its log says so) and nothing acknowledged is lost.
	for n in $(conf_nodes "$CONF"); do
		kill -KILL "$(redis_pid "$n")" 2>/dev/null || true
	done
	retry 600 0.1 mc_serving_all || fail "not every node is back after the second kill -9 of all: $(status_json); $(show_logs "$CONF" 15)"
	grep -q "serving clients as leader of view" "$(data_dir "$(leader_id)")/apus.log" ||
		fail "the leader's log never says it serves clients"
	retry 20 1 mc_audit_all "$one" one || fail "after the second kill -9: $(mc_audit_all "$one" one)"
	retry 20 1 mc_audit_all "$two" two || fail "after the second kill -9: $(mc_audit_all "$two" two)"

	# A backup whose data directory is gone is rebuilt from a peer.
	victim=$(backups | head -n 1)
	run timeout 60 "$APUS" stop --config "$CONF" --node "$victim" 3>&-
	assert_eq "$status" 0 "apus stop --node $victim: $output"
	rm -rf "$(data_dir "$victim")"
	run timeout 120 "$APUS" rebuild --config "$CONF" --node "$victim" 3>&-
	assert_eq "$status" 0 "apus rebuild --node $victim: $output"
	retry 600 0.1 mc_serving_all || fail "node $victim is not back: $(status_json)"
	retry 20 1 mc_audit_all "$one" one || fail "after the rebuild: $(mc_audit_all "$one" one)"
	retry 20 1 mc_audit_all "$two" two || fail "after the rebuild: $(mc_audit_all "$two" two)"
	wait_mc_digests_equal "$(conf_nodes "$CONF")" 30 --all
}

# mc_orphans CONF - pids of `sleep 617` processes started for CONF's nodes
# (the snapshot_load_cmd of the test below).
function mc_orphans() {
	local p
	for p in $(pgrep -x sleep); do
		[ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" = "sleep 617 " ] || continue
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "APUS_CONFIG=$1" && echo "$p"
	done
	return 0
}

# A node's snapshot_cmd and snapshot_load_cmd run in sessions of their own,
# so a kill -9 of the server leaves them running.  One left running acted
# on the node's next server: memcached's snapshot.py dumped that server,
# still empty, over the file it was about to load, and the node lost every
# write before its recovery point (the test above, now and then, after
# apus stop and start).  Whatever brings a node back ends them first.
@test "a snapshot_load_cmd whose server was killed is ended before the node's next server starts" {
	OWN_CONF=$(mc_conf "$(test_dir own20500)" 20500)
	CONF=$OWN_CONF
	MC_PORTBASE=20500
	mc_kill_leftovers "$CONF"
	start_cluster "$CONF"
	local log="$BATS_TEST_TMPDIR/w.log" b load left
	mc_write "$log" w 300
	b=$(all_backups | head -n 1)
	# A recovery point for b, then b starts from it with a load that
	# never ends, and its server is killed under it.
	touch "$(data_dir "$b")/apus.snapshot.request"
	retry 100 0.1 test -f "$(data_dir "$b")/apus.seed" || fail "node $b took no snapshot"
	run timeout 60 "$APUS" stop --config "$CONF" --node "$b" 3>&-
	assert_eq "$status" 0 "apus stop --node $b: $output"
	load=$(grep '^snapshot_load_cmd = ' "$CONF")
	sed -i 's|^snapshot_load_cmd = .*|snapshot_load_cmd = exec sleep 617|' "$CONF"
	run timeout 120 "$APUS" start --config "$CONF" --node "$b" 3>&-
	assert_eq "$status" 0 "apus start --node $b: $output"
	retry 100 0.1 eval '[ -n "$(mc_orphans "$CONF")" ]' || fail "node $b's snapshot_load_cmd did not start"
	kill -KILL "$(redis_pid "$b")"
	retry 100 0.1 eval '! kill -0 "$(redis_pid "$b")" 2>/dev/null' || fail "node $b's server outlived SIGKILL"
	[ -n "$(mc_orphans "$CONF")" ] || fail "the load command ended with its server: nothing to test"
	# Back with the real load: the command its dead server left is gone
	# before the new server starts, and b holds every acknowledged write.
	sed -i "s|^snapshot_load_cmd = .*|$load|" "$CONF"
	run timeout 120 "$APUS" start --config "$CONF" --node "$b" 3>&-
	left=$(mc_orphans "$CONF")
	# shellcheck disable=SC2086 # one pid a word
	[ -z "$left" ] || kill -KILL $left
	assert_eq "$status" 0 "apus start --node $b: $output"
	[ -z "$left" ] || fail "apus start left node $b's old snapshot_load_cmd running (pids $left)"
	retry 20 1 mc_audit_all "$log" w || fail "node $b after its restart: $(mc_audit_all "$log" w)"
}

# A recovery point is the server's data, not its read buffers: a point
# taken where the server had read only the first part of a request would
# hold neither that part nor the request, and a node restarting from it
# replays the rest alone (doc/limits.md).  A backup's point waits for an
# entry where its server answered every read (snapshot.c, hold_answered).
@test "a recovery point never cuts a request read in part: a backup restarted from its point holds a set sent in two parts" {
	OWN_CONF=$(mc_conf "$(test_dir own20600)" 20600)
	CONF=$OWN_CONF
	MC_PORTBASE=20600
	mc_kill_leftovers "$CONF"
	start_cluster "$CONF"
	local log="$BATS_TEST_TMPDIR/w.log" go="$BATS_TEST_TMPDIR/go" out="$BATS_TEST_TMPDIR/out" b dir lead host port err before
	mc_write "$log" w 100
	b=$(all_backups | head -n 1)
	dir=$(data_dir "$b")
	# A point of b's before the request: what it restarts from otherwise.
	touch "$dir/apus.snapshot.request"
	retry 100 0.1 test -f "$dir/apus.seed" || fail "node $b took no snapshot"
	lead=$(leader_id)
	host=$(node_host "$lead")
	port=$(app_port "$lead")
	# The first part of a set, then the rest once told to.
	timeout 60 python3 -c '
import os, socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"set cut 0 0 10\r\n12345")
open(sys.argv[4], "w").write("half\n")
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
s.sendall(b"67890\r\n")
open(sys.argv[4], "w").write(s.recv(100).decode())' "$host" "$port" "$go" "$out" 3>&- &
	retry 100 0.1 grep -q half "$out" || fail "the client did not send its first part"
	retry 100 0.1 eval '[ "$(status_node "$(status_json)" "$b" applied)" -ge "$(status_node "$(status_json)" "$lead" commit)" ]' ||
		fail "node $b did not execute the first part: $(status_json)"
	# b is asked for a point while its server holds the first part.
	before=$(status_node "$(status_json)" "$b" recovery_point_index)
	touch "$dir/apus.snapshot.request"
	retry 100 0.1 eval 'err=$(status_node "$(status_json)" "$b" recovery_point_error); [[ "$err" == *unanswered* ]]' ||
		fail "node $b's point was not refused: $(status_json)"
	assert_eq "$(status_node "$(status_json)" "$b" recovery_point_index)" "$before" "node $b's recovery point"
	run timeout 60 "$APUS" stop --config "$CONF" --node "$b" 3>&-
	assert_eq "$status" 0 "apus stop --node $b: $output"
	touch "$go"
	retry 100 0.1 grep -q STORED "$out" || fail "the set was not stored: $(cat "$out")"
	wait
	run timeout 120 "$APUS" start --config "$CONF" --node "$b" 3>&-
	assert_eq "$status" 0 "apus start --node $b: $output"
	retry 100 0.1 eval '[ "$(mc_get "$b" cut)" = 1234567890 ]' ||
		fail "node $b after its restart holds cut = $(mc_get "$b" cut); $(show_logs "$CONF" 10)"
	retry 20 1 mc_audit_all "$log" w || fail "after the restart: $(mc_audit_all "$log" w)"
}
