#!/usr/bin/env bats
# The output checker: every replica hashes what its server wrote on each
# replayed connection and compares with the leader's checkpoints.
# Deterministic traffic leaves no record; nondeterministic commands are
# caught on exactly the connections that ran them.

load helpers

setup_file() {
	file_cluster 17700
}

function teardown() {
	end_writer
	WRITER=
	[ -n "${OWN_CONF:-}" ] && stop_cluster "$OWN_CONF"
	OWN_CONF=
}

div_json() { timeout 30 "$APUS" divergence --config "$CONF" --json "$@" 3>&-; }

# connections NODE JSON - how many connections of NODE diverged.
connections() {
	grep -o "{\"node\":$1,[^{}]*}" <<<"$2" | grep -o '"connections":[0-9]*' | cut -d: -f2
}

# wait_connections NODE WANT - retry (30 s) until NODE reports WANT diverged connections.
wait_connections() {
	local j
	for _ in $(seq 150); do
		j=$(div_json)
		[ "$(connections "$1" "$j")" = "$2" ] && return 0
		sleep 0.2
	done
	echo "node $1: want $2 diverged connections, report: $j" >&2
	return 1
}

@test "deterministic load leaves no divergence record" {
	local port j n
	port=$(leader_port)
	bench -t set,get,incr,lpush,rpush,lpop,sadd,hset,lrange_100 -n 8000 -c 20 -r 10000 -q
	wait_digests_equal "$CONF" 30
	j=$(div_json)
	assert_eq "$(json_field "$(strip_nodes "$j")" total)" 0 "divergence records after deterministic load: $j"
	for n in $(conf_nodes "$CONF"); do
		assert_eq "$(status_node "$(status_json)" "$n" divergences)" 0 "node $n divergences in status"
	done
}

@test "nondeterministic commands diverge on exactly their connections" {
	local port n cmd
	port=$(leader_port)
	# (TIME, SPOP and RANDOMKEY are no longer: the clock and random numbers
	# are inputs of the log.)  These report the replica's own process.
	for cmd in "CLIENT LIST" "CLIENT INFO" "INFO memory" "INFO cpu" "INFO server"; do
		# shellcheck disable=SC2086
		redis-cli -p "$port" $cmd >/dev/null
		# Deterministic sessions in between must not be flagged.
		redis-cli -p "$port" PING >/dev/null
		redis-cli -p "$port" GET "no such key" >/dev/null
	done
	local bs
	bs=$(all_backups) || fail "not every other node is a backup"
	for n in $bs; do
		wait_connections "$n" 5 || fail "node $n"
	done
	assert_eq "$(connections 0 "$(div_json)")" 0 "the leader compares nothing with itself"
	# Each record names a connection and a byte offset.
	div_json | grep -o '"offset":[0-9]*' | grep -vq '"offset":0$' || fail "records without offsets"
	run timeout 30 "$APUS" divergence --config "$CONF" 3>&-
	assert_eq "$status" 0 "apus divergence"
	[[ "$output" == *"node 1: 5 connection(s)"* ]] || fail "text report: $output"
}

@test "a 100,000-element LRANGE that differs only in its last byte is caught" {
	local port before n j
	port=$(leader_port)
	before=$(div_json)
	redis-cli -p "$port" EVAL "for i=1,100000 do redis.call('rpush', KEYS[1], i) end" 1 biglist >/dev/null
	# The last element is the last digit of each replica's own port: it
	# differs on every replica, and it is one byte.
	redis-cli -p "$port" EVAL "local p = string.match(redis.call('info','server'), 'tcp_port:(%d+)'); return redis.call('rpush', KEYS[1], string.sub(p, -1))" 1 biglist >/dev/null
	redis-cli -p "$port" LRANGE biglist 0 -1 | tail -n 1 | grep -qx "$(( $(app_port 0) % 10 ))" ||
		fail "the leader's last element is not its port's last digit"
	local bs
	bs=$(all_backups) || fail "not every other node is a backup"
	for n in $bs; do
		# The EVAL itself replies with the list's length: no divergence;
		# the LRANGE session must add exactly one diverged connection.
		wait_connections "$n" $(( $(connections "$n" "$before") + 1 )) || fail "node $n"
		j=$(div_json --node "$n")
		# Its offset is the end of a ~1 MB reply.
		grep -o '"offset":[0-9]*' <<<"$j" | cut -d: -f2 | sort -n | tail -n 1 |
			awk '{ exit !($1 > 500000) }' || fail "node $n: offsets $(grep -o '"offset":[0-9]*' <<<"$j")"
	done
}

@test "--since filters by time" {
	local n
	# A record of its own: INFO on a new connection diverges on every backup.
	n=$(all_backups | head -n 1) || fail "no backup"
	j=$(div_json)
	local had
	had=$(connections "$n" "$j")
	redis-cli -h "$(leader_host)" -p "$(leader_port)" INFO server >/dev/null
	wait_connections "$n" $((${had:-0} + 1)) || fail "the INFO connection left no record on node $n"
	j=$(div_json --since "$(( $(date +%s) + 3600 ))")
	assert_eq "$(json_field "$(strip_nodes "$j")" total)" 0 "records from the future"
	j=$(div_json --since 1h)
	[ "$(json_field "$(strip_nodes "$j")" total)" -gt 0 ] || fail "records of the last hour: $j"
	run timeout 10 "$APUS" divergence --config "$CONF" --since yesterday 3>&-
	[ "$status" -ne 0 ] || fail "a bad --since was accepted"
}

@test "divergence = unhealthy marks a diverged backup in apus status" {
	local conf port n j
	conf=$(make_conf "$(test_dir unhealthy)" 17750)
	sed -i 's/^fsync .*/&\ndivergence   = unhealthy/' "$conf"
	grep -q '^divergence   = unhealthy' "$conf" || fail "config edit failed"
	start_cluster "$conf" || fail "cluster did not start"
	port=$(leader_port "$conf")
	j=$(status_json "$conf")
	for n in $(conf_nodes "$conf"); do
		grep -q "\"id\":$n,[^}]*\"healthy\":true" <<<"$j" || fail "node $n not healthy before: $j"
	done
	redis-cli -p "$port" INFO server >/dev/null
	for n in $(backups "$conf"); do
		retry 50 0.2 bash -c "'$APUS' status --config '$conf' --json 3>&- | grep -q '\"id\":$n,[^}]*\"healthy\":false'" ||
			{ stop_cluster "$conf"; fail "node $n still healthy: $(status_json "$conf")"; }
	done
	status_json "$conf" | grep -q '"id":0,[^}]*"healthy":true' || fail "the leader became unhealthy"
	stop_cluster "$conf"
}

@test "divergence = repair: a backup whose state diverged (SPOP) is rebuilt from the leader's; one whose replies alone differed (INFO) is left as it is" {
	local conf port n glog
	requires_criu
	# randomness = machine: SPOP draws each replica's own members.
	conf=$(APUS_TEST_GUARD=on APUS_TEST_SEED_FUNCTION= APUS_TEST_CONF_LINES="verify_cmd   = $APUS_ROOT/apps/redis/verify.txt
repair_interval_s = 1
randomness = machine" make_conf "$(test_dir repair)" 17760)
	OWN_CONF=$conf
	start_cluster "$conf" || fail "cluster did not start"
	port=$(leader_port "$conf")
	# Replies alone: INFO differs on every replica (pid, uptime), the state
	# does not.
	redis-cli -p "$port" INFO server >/dev/null
	for n in $(backups "$conf"); do
		glog="$(data_dir "$n" "$conf")/apus.guard.log"
		retry 150 0.2 grep -q "apus verify finds its state equal: not repaired" "$glog" ||
			fail "node $n's guard did not check and leave it: $(cat "$glog")"
	done
	# The state: each replica pops members of its own choosing.
	redis-cli -p "$port" SADD s $(seq 1 200) >/dev/null
	redis-cli -p "$port" SPOP s 50 >/dev/null
	for n in $(backups "$conf"); do
		glog="$(data_dir "$n" "$conf")/apus.guard.log"
		retry 300 0.2 grep -q "node $n rebuilt from node" "$glog" ||
			fail "node $n was not repaired: $(cat "$glog"); $(digests "$conf")"
	done
	wait_digests_equal "$conf" 60
	assert_eq "$(CONF=$conf admin "$(backups "$conf" | head -n 1)" SCARD s)" 150 "members left on a repaired backup"
}
