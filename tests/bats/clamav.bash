# Sourced by tests/bats/clamav.bats (after helpers.bash): a 3-replica clamd
# cluster of the shipped apps/clamav/cluster-shm.conf (guard on, recovery
# points) on CLAM_PORTBASE (20900 unless set before loading: ports
# PORTBASE+1..+3) with a 2 MB log, made by apps/clamav/init.sh, and what its
# tests check it with.

CLAM_APP="$APUS_ROOT/apps/clamav"
PY=/usr/bin/python3

have_clamd() {
	[ -x /usr/sbin/clamd ] && [ -x "$PY" ]
}

# clam_conf DIR PORTBASE - apps/clamav/cluster-shm.conf with node i on
# PORTBASE+1+i, its data in DIR/n<i>, a 2 MB log (the workload wraps it)
# and no fsync.  With APUS_TEST_NETNS: apps/clamav/cluster-tcp.conf, its
# ports as shipped, in the tests' namespaces.
clam_conf() {
	local dir=$1 portbase=$2
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		shipped_tcp_conf clamav "$dir" -e "s/^cluster .*/cluster = test$portbase/" \
			-e "s/^log_size .*/log_size = 2M/" -e "s/^fsync .*/fsync = none/"
		return
	fi
	sed -e "s#/tmp/apus-clamav/node\([0-9]\)#$dir/n\1#" -e "s/^cluster .*/cluster = test$portbase/" \
		-e "s/= 760\([1-3]\)/= $((portbase / 10))\1/" -e "s/^log_size .*/log_size = 2M/" \
		-e "s/^fsync .*/fsync = none/" -e "s#{config_dir}#$CLAM_APP#g" \
		"$CLAM_APP/cluster-shm.conf" >"$dir/apus.conf"
	echo "$dir/apus.conf"
}

# kill_clamd_leftovers CONF - clamd processes of an aborted earlier run (on its ports).
kill_clamd_leftovers() { kill_named_on_ports "$1" clamd; }

# clam_ask HOST PORT COMMAND - one command on a connection of its own; its reply.
clam_ask() {
	"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import clamd_client as cc
print(cc.ask(sys.argv[2], int(sys.argv[3]), sys.argv[4].encode(), timeout=5))' "$CLAM_APP" "$1" "$2" "$3"
}

# clam_serving [CONF] - the leader answers PING over its app port.
clam_serving() {
	local port host
	port=$(leader_port "${1:-$CONF}") && host=$(leader_host "${1:-$CONF}") || return 1
	[ "$(clam_ask "$host" "$port" PING 2>/dev/null)" = PONG ]
}

# workload ARGS... - apps/clamav/workload.py at the leader; its output in
# $output, its status in $status.
workload() {
	run timeout 300 "$PY" "$CLAM_APP/workload.py" --host "$(leader_host)" --port "$(leader_port)" "$@"
	echo "$output" | tail -n 5
}

# no_divergence - no backup's output differed from the leader's: apus
# divergence counts no record.
no_divergence() {
	local j
	j=$(timeout 30 "$APUS" divergence --config "$CONF" --json 3>&-) || return 1
	[ "$(json_field "$(strip_nodes "$j")" total)" = 0 ] && return 0
	timeout 30 "$APUS" divergence --config "$CONF" 3>&- | head -n 12
	return 1
}

# verify_all N - apus verify: the leader and N backups answer alike.
verify_all() {
	run timeout 90 "$APUS" verify --config "$CONF" --timeout 60000 3>&-
	echo "$output"
	[ "$status" -eq 0 ] && [ "$(grep -c ': equal' <<<"$output")" -eq "$1" ]
}

setup_file() {
	have_clamd || return 0
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		have netns || return 0
	fi
	local dir
	dir=$(test_dir clamav)
	CONF=$(clam_conf "$dir" "${CLAM_PORTBASE:-20900}")
	export CONF
	kill_clamd_leftovers "$CONF"
	"$CLAM_APP/init.sh" --config "$CONF" --force >/dev/null
	start_cluster "$CONF"
	retry 100 0.2 clam_serving "$CONF"
}

teardown_file() {
	[ -n "${CONF:-}" ] || return 0
	stop_cluster "$CONF"
	kill_clamd_leftovers "$CONF"
	"$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$CONF")"
}

setup() {
	have_clamd || skip "test requires clamd (apt-get install clamav-daemon) and /usr/bin/python3"
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
}

# wait_new_leader_clam OLD - wait (30 s) until a node other than OLD leads
# and answers PING; its id in NEW.
wait_new_leader_clam() {
	local i
	for ((i = 0; i < 150; i++)); do
		NEW=$(leader_id 2>/dev/null) || NEW=
		[ -n "$NEW" ] && [ "$NEW" != "$1" ] && clam_serving && return 0
		sleep 0.2
	done
	"$APUS" status --config "$CONF" 3>&- >&2
	fail "no new leader after 30 s (old: $1)"
}

# node_applied_all N - node N runs as a backup and has applied all the
# leader has committed.
node_applied_all() {
	local j l
	j=$(status_json) || return 1
	l=$(json_field "$(strip_nodes "$j")" leader) || return 1
	[ "$(status_node "$j" "$1" role)" = backup ] &&
		[ "$(status_node "$j" "$1" applied)" = "$(status_node "$j" "$l" commit)" ]
}
