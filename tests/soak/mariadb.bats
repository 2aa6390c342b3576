#!/usr/bin/env bats
# shellcheck disable=SC2154,SC2001 # status and output are set by bats' run; sed prefixes lines.
# The MariaDB soak (make soak; issue 28): mariadbd as shipped
# (apps/mariadb/cluster-shm.conf's settings: the guard on, app_reset_cmd,
# held backups' dumps as recovery points, snapshot_connections = none,
# thread_order = requests) with a 1 MB log that wraps every round, audited
# inserts (audit.sh: a connection per insert, following the leader)
# running throughout, through rounds of kill -9 of every node (twice),
# apus stop + start of all, kill -9 of the leader and of a backup, and a
# leader paused (SIGSTOP) for 2 s.  After each round the leader must
# answer a query (an insert) at its app port within 30 s (SOAK_SERVE_BOUND_S)
# of the fault (of
# the start, for stop + start); at the end every acknowledged insert is on
# every replica, none that was never attempted is, and CHECKSUM TABLE is
# equal on all three.  SOAK_ROUNDS overrides the rounds.
# APUS_TEST_NETNS=tcp-netns: tcp, each replica in its own namespace.
# Ports 18800-18839: app 18801-18803, peers 18811-18813, guards
# 18821-18823 (in namespaces: 18801, 18811, 18821 at each node's address).

load ../bats/helpers
load faults

MARIADB_APP="$APUS_ROOT/apps/mariadb"
PB=18800
# The bound on a leader's serving after each fault, in seconds
# (SOAK_SERVE_BOUND_S overrides it).
SERVE_BOUND=${SOAK_SERVE_BOUND_S:-30}

function setup() {
	if ! [ -x /usr/sbin/mariadbd ] || ! command -v mariadb-install-db >/dev/null 2>&1 ||
		! command -v mariadb >/dev/null 2>&1; then
		skip "test requires mariadb-server and mariadb-client (scripts/install-deps.sh)"
	fi
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
}

function teardown() {
	end_mdb_writer
	keep_logs
	if [ -n "${OWN_CONF:-}" ]; then
		stop_cluster "$OWN_CONF"
		mdb_kill_leftovers "$OWN_CONF"
		bash "$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$OWN_CONF")"
	fi
	OWN_CONF=
}

# soak_conf DIR LOG_SIZE - apps/mariadb/cluster-shm.conf's settings with a
# log of LOG_SIZE and this file's ports and data (DIR/n<i>); over tcp with
# each node in its namespace under APUS_TEST_NETNS (as make_conf does).
function soak_conf() {
	local dir=$1 conf="$1/apus.conf" i
	mkdir -p "$dir"
	{
		sed -n '/^\[node/q;p' "$MARIADB_APP/cluster-shm.conf" |
			sed -e "s/^cluster .*/cluster = soak$PB/" -e "s/^log_size .*/log_size = $2/" \
				-e "s#{config_dir}#$MARIADB_APP#g"
		if [ -n "${APUS_TEST_REGION_DIR:-}" ]; then
			echo "region_dir = $APUS_TEST_REGION_DIR"
		elif [ -n "${APUS_TEST_SHM:-}" ]; then
			echo "region_dir = $APUS_TEST_SHM"
		fi
		for ((i = 0; i < 3; i++)); do
			echo
			echo "[node $i]"
			if [ -n "${APUS_TEST_NETNS:-}" ]; then
				echo "address  = $("$NETNS" addr "$i")"
				echo "netns    = $("$NETNS" name "$i")"
				echo "app_port = $((PB + 1))"
				echo "peer_port = $((PB + 11))"
				echo "guard_port = $((PB + 21))"
			else
				echo "address  = 127.0.0.1"
				echo "app_port = $((PB + 1 + i))"
				echo "peer_port = $((PB + 11 + i))"
				echo "guard_port = $((PB + 21 + i))"
			fi
			echo "data_dir = $dir/n$i"
		done
	} >"$conf"
	[ -n "${APUS_TEST_NETNS:-}" ] && sed -i "s/^transport .*/transport = tcp/" "$conf"
	grep -q "^guard = on" "$conf" && grep -q "^app_reset_cmd = $MARIADB_APP/reset.sh" "$conf" &&
		grep -q "^snapshot_connections = none" "$conf" && grep -q "^log_size = $2" "$conf" || return 1
	echo "$conf"
}

# mdb_kill_leftovers CONF - mariadbd processes of an aborted earlier run
# (on CONF's app ports), and nothing else.
function mdb_kill_leftovers() {
	local n port ns in pid
	[ -f "$1" ] || return 0
	for n in $(conf_nodes "$1"); do
		port=$(conf_node_get "$1" "$n" app_port)
		ns=$(conf_node_get "$1" "$n" netns)
		in=()
		[ -n "$ns" ] && in=(ip netns exec "$ns")
		for pid in $("${in[@]}" ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
			[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = mariadbd ] && kill -KILL "$pid" 2>/dev/null
		done
	done
	return 0
}

# leader_sql SQL - SQL through the leader's app port (replicated), a
# connection of its own.
function leader_sql() {
	local id
	id=$(leader_id) || return 1
	[ -n "$id" ] && [ "$id" != null ] || return 1
	timeout 10 mariadb --no-defaults --connect-timeout=3 -h "$(node_host "$id")" -P "$(app_port "$id")" \
		-u sbtest -N -B sbtest -e "$1" 2>&1
}

# mdb_serving_leader N - the leader answers an insert and reads it back.
function mdb_serving_leader() {
	[ "$(leader_sql "REPLACE INTO soak_probe VALUES (1, $1); SELECT v FROM soak_probe WHERE id = 1")" = "$1" ]
}

# mdb_serving_all - the leader serves and every node is a recoverable
# backup or the leader again.
function mdb_serving_all() {
	local j n
	mdb_serving_leader 0 || return 1
	all_backups >/dev/null 2>&1 || return 1
	j=$(status_json) || return 1
	for n in $(conf_nodes "$CONF"); do
		[ "$(status_node "$j" "$n" recoverable)" = true ] || return 1
	done
}

# mdb_fill FROM COUNT - COUNT replaces of 50 kB rows (ids FROM.. modulo 40),
# a connection each: log bytes.
function mdb_fill() {
	local i try big
	printf -v big '%*s' 50000 ''
	big=${big// /x}
	for ((i = $1; i < $1 + $2; i++)); do
		# A client whose input waits a second for room in the full log
		# is disconnected (snapshot_connections = none): it tries again,
		# as tests/bats/mariadb.bats's filler does.
		for ((try = 1; ; try++)); do
			leader_sql "REPLACE INTO filler VALUES ($((i % 40)), '$big')" >/dev/null && break
			[ "$try" -lt 5 ] || return 1
			sleep 0.5
		done
	done
}

# start_mdb_writer - audit.sh inserts (table w<k>, log $WDIR/w<k>.log)
# until end_mdb_writer; a new one should one end early.
function start_mdb_writer() {
	WDIR="$BATS_TEST_TMPDIR/writer"
	mkdir -p "$WDIR"
	(
		k=0
		while [ ! -e "$WDIR/stop" ]; do
			k=$((k + 1))
			echo "$k" >"$WDIR/current"
			APUS_BIN="$APUS" timeout 900 "$MARIADB_APP/audit.sh" write --config "$CONF" \
				--log "$WDIR/w$k.log" --count 1000000 --table "w$k" >>"$WDIR/out" 2>&1
		done
	) 3>&- &
	WPID=$!
}

# end_mdb_writer - the writer ends now (SIGTERM through timeout, to its
# client too).  The insert it was waiting on may yet have committed: its
# log counts it as attempted.
function end_mdb_writer() {
	local l last
	[ -n "${WPID:-}" ] || return 0
	touch "$WDIR/stop"
	pkill -TERM -P "$WPID" 2>/dev/null || true
	wait_pids_gone 10 "$WPID" || kill -KILL "$WPID" 2>/dev/null
	wait "$WPID" 2>/dev/null || true
	WPID=
	l="$WDIR/w$(cat "$WDIR/current").log"
	last=$(grep -E '^(ok|fail) ' "$l" 2>/dev/null | tail -n 1 | cut -d' ' -f2)
	echo "fail $((${last:-0} + 1)) (the writer was ended)" >>"$l"
	return 0
}

# audit_all - every writer log's acknowledged inserts on every node (each
# of the three answered: audit.sh check passes on those that do).
function audit_all() {
	local l out
	for l in "$WDIR"/w*.log; do
		out=$(APUS_BIN="$APUS" timeout 120 "$MARIADB_APP/audit.sh" check --config "$CONF" --log "$l" \
			--table "$(basename "$l" .log)" 2>&1) || { echo "$out"; return 1; }
		echo "$out"
		[ "$(grep -c ' rows; ' <<<"$out")" -eq 3 ] || return 1
	done
}

@test "mariadb as shipped, 1 MB log: kill -9 of all (twice), stop/start of all, kill -9 of a leader and a backup, pause of a leader: every acknowledged insert on every replica, checksums equal, the leader answers a query within 30 s each time" {
	OWN_CONF=$(soak_conf "$(test_dir own$PB)" 1M) || fail "soak_conf failed"
	CONF=$OWN_CONF
	mdb_kill_leftovers "$CONF"
	"$MARIADB_APP/init.sh" --config "$CONF" --force >/dev/null
	start_cluster "$CONF"
	local round n p l t0 fill tstart=$SECONDS k=0 acked=0 pos0 pos times=""
	retry 100 0.3 leader_sql "CREATE TABLE IF NOT EXISTS soak_probe (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;
		CREATE TABLE IF NOT EXISTS filler (id INT PRIMARY KEY, v LONGTEXT) ENGINE=InnoDB" ||
		fail "the leader never answered: $output"
	pos0=$(max_log_pos)
	start_mdb_writer
	local rounds=${SOAK_ROUNDS:-kill-all stop-start kill-leader kill-all pause-leader kill-backup}
	for round in $rounds; do
		sleep 3
		t0=$SECONDS
		# Fill the log between faults: 24 rows of 50 kB, more than the
		# 1 MB log holds.
		mdb_fill $((k * 24)) 24 || fail "$round: the fill failed: $(status_json); $(show_logs "$CONF" 15)"
		k=$((k + 1))
		fill=$((SECONDS - t0))
		t0=$SECONDS
		inject "$round"
		sleep 0.5
		until mdb_serving_leader "$k"; do
			[ $((SECONDS - t0)) -lt "$SERVE_BOUND" ] ||
				fail "$round: the leader answers no query after $((SECONDS - t0)) s ($(leader_sql "SELECT $k" 2>&1)): $(status_json); $(show_logs "$CONF" 15)"
			sleep 0.25
		done
		echo "# $round: the leader answers after $((SECONDS - t0)) s (fill $fill s; at $((SECONDS - tstart)) s)" >&3
		times+=" $round=$((SECONDS - t0))s"
		[ $((SECONDS - t0)) -le "$SERVE_BOUND" ] || fail "$round: the leader answered after more than $SERVE_BOUND s"
	done
	end_mdb_writer
	tail -n 5 "$WDIR/out" 2>/dev/null || true
	for l in "$WDIR"/w*.log; do
		acked=$((acked + $(grep -c '^ok ' "$l")))
	done
	echo "# audited writer: $acked inserts acknowledged ($(cat "$WDIR"/w*.log | grep -c '^fail ') failed; $(cat "$WDIR/current") writer run(s))" >&3
	[ "$acked" -ge $((30 * $(wc -w <<<"$rounds"))) ] || fail "only $acked inserts acknowledged"
	t0=$SECONDS
	retry 600 0.2 mdb_serving_all || fail "not every node is back: $(status_json); $(show_logs "$CONF" 15)"
	echo "# every node back $((SECONDS - t0)) s after the rounds" >&3
	pos=$(max_log_pos)
	echo "# log: $((pos - pos0)) bytes written, $(((pos - pos0) >> 20)) times its 1 MB (log_pos $pos0 -> $pos)" >&3
	# Each round's fill alone is more than the log holds.
	[ $((pos - pos0)) -gt $(($(wc -w <<<"$rounds") << 20)) ] || fail "the log wrapped fewer times than there were rounds"
	retry 30 1 audit_all || fail "after the rounds: $output"
	sed 's/^/# /' <<<"$output" >&3
	retry 60 1 "$MARIADB_APP/checksum.sh" --config "$CONF" || fail "replicas differ: $output"
	sed 's/^/# checksum: /' <<<"$output" >&3
	echo "# serve times:$times; done at $((SECONDS - tstart)) s" >&3
	for n in $(conf_nodes "$CONF"); do
		! grep -q "stepping down from view" "$(data_dir "$n")/apus.log" ||
			echo "# node $n stepped down as a leader that could not execute its log (allowed, said)" >&3
	done
}
