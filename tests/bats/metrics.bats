#!/usr/bin/env bats
# Prometheus metrics: every node serves GET /metrics on its metrics_port
# (text format 0.0.4); the counters move with writes, refused clients, a
# checkpoint and a failover; other paths get 404; a client that sends
# nothing does not block a scrape; a node whose metrics port is taken runs
# without one.

load helpers

setup_file() {
	export APUS_TEST_METRICS=1
	file_cluster 19000
}

# The cluster, and its regions in /dev/shm (tests/run.sh sweeps them too,
# but this file may run alone).
teardown_file() {
	stop_cluster "${CONF:-}"
	[ -n "${CONF:-}" ] && bash "$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$CONF")"
	return 0
}

# metrics_url NODE [PATH] - where NODE serves its metrics.
function metrics_url() {
	echo "http://$(node_host "$1"):$(conf_node_get "$CONF" "$1" metrics_port)${2:-/metrics}"
}

# scrape NODE - NODE's metrics text (fails when the endpoint does).
function scrape() {
	curl -sS --fail --max-time 5 "$(metrics_url "$1")"
}

# value TEXT NAME [LABEL=\"V\"] - the value of the sample NAME (with that
# label, if given) in TEXT; fails when there is none.
function value() {
	awk -v name="$2" -v label="${3:-}" '
		index($1, name "{") == 1 && (label == "" || index($1, label)) { print $2; found = 1; exit }
		END { exit !found }' <<<"$1"
}

# metric NODE NAME [LABEL] - scrape NODE and print one value.
function metric() {
	local text
	text=$(scrape "$1") || return 1
	value "$text" "$2" "${3:-}"
}

# metric_at_least NODE NAME MIN [LABEL] - NODE's NAME is MIN or more (for retry).
function metric_at_least() {
	local v
	v=$(metric "$1" "$2" "${4:-}") || return 1
	[ "$v" -ge "$3" ]
}

# metric_is NODE NAME WANT - NODE's NAME is WANT (for retry).
function metric_is() {
	[ "$(metric "$1" "$2")" = "$3" ]
}

# role_is NODE ROLE - apus status shows NODE in ROLE (for retry).
function role_is() {
	[ "$(status_node "$(status_json)" "$1" role)" = "$2" ]
}

# leader_other_than OLD - apus status names a leader, and not OLD.
function leader_other_than() {
	local id
	id=$(leader_id) || return 1
	[[ "$id" =~ ^[0-9]+$ ]] && [ "$id" != "$1" ]
}

# listening PORT [NETNS] - something listens on TCP PORT.
function listening() {
	if [ -n "${2:-}" ]; then
		ip netns exec "$2" ss -ltnH "sport = :$1" | grep -q .
	else
		ss -ltnH "sport = :$1" | grep -q .
	fi
}

@test "GET /metrics: Prometheus text, every line parses, roles as apus status says" {
	local n leader text hdr bad fam
	leader=$(leader_id)
	for n in $(conf_nodes "$CONF"); do
		hdr=$(curl -sS --fail --max-time 5 -o /dev/null -D - "$(metrics_url "$n")") ||
			fail "node $n: no metrics at $(metrics_url "$n")"
		grep -qi '^content-type: text/plain; version=0.0.4' <<<"$hdr" ||
			fail "node $n: wrong content type: $hdr"
		text=$(scrape "$n")
		# Comments are HELP/TYPE lines; everything else is name{labels} value,
		# with this node's label.
		bad=$(grep -vE '^# (HELP|TYPE) apus_[a-z_]+ ' <<<"$text" |
			grep -vE "^apus_[a-z_]+\{cluster=\"test19000\",node=\"$n\"(,[a-z]+=\"[^\"]*\")*\} -?[0-9]+(\.[0-9]+)?$" || true)
		[ -z "$bad" ] || fail "node $n: lines that do not parse: $bad"
		# Each sample's family has its HELP and TYPE.
		for fam in $(grep -v '^#' <<<"$text" | sed -E 's/\{.*//; s/_(bucket|sum|count)$//' | sort -u); do
			grep -q "^# HELP $fam " <<<"$text" || fail "node $n: no HELP for $fam"
			grep -q "^# TYPE $fam " <<<"$text" || fail "node $n: no TYPE for $fam"
		done
		grep -q '^# TYPE apus_commit_latency_seconds histogram$' <<<"$text" ||
			fail "node $n: commit latency is not a histogram"
		if [ "$n" = "$leader" ]; then
			assert_eq "$(value "$text" apus_role 'role="leader"')" 1 "node $n role=leader"
		else
			assert_eq "$(value "$text" apus_role 'role="backup"')" 1 "node $n role=backup"
			assert_eq "$(value "$text" apus_role 'role="leader"')" 0 "node $n role=leader"
		fi
		assert_eq "$(value "$text" apus_leader_node)" "$leader" "node $n: leader it knows"
		assert_eq "$(value "$text" apus_log_size_bytes)" $((64 << 20)) "node $n: log size"
		# A peer series for every other node, none for itself.
		assert_eq "$(grep -c '^apus_peer_sent_bytes_total{' <<<"$text")" $((APUS_TEST_NODES - 1)) \
			"node $n: peer series"
		! grep -q "^apus_peer_sent_bytes_total{.*peer=\"$n\"" <<<"$text" ||
			fail "node $n: a peer series for itself"
	done
}

@test "writes move proposals, commit, the latency histogram, bytes per peer and backups' applied index" {
	local leader text n before_prop before_commit before_count before_sum k
	local -A before_sent
	leader=$(leader_id)
	text=$(scrape "$leader") || fail "no metrics from the leader"
	before_prop=$(value "$text" apus_proposals_total)
	before_commit=$(value "$text" apus_commit_index)
	before_count=$(value "$text" apus_commit_latency_seconds_count)
	before_sum=$(value "$text" apus_commit_latency_seconds_sum)
	local bs
	bs=$(all_backups) || fail "not every other node is a backup"
	for n in $bs; do
		before_sent[$n]=$(value "$text" apus_peer_sent_bytes_total "peer=\"$n\"")
	done
	# One client per request: each is its own proposal and commit wait.
	for ((k = 0; k < 50; k++)); do
		redis-cli -h "$(node_host "$leader")" -p "$(app_port "$leader")" SET "m:$k" "value-$k" >/dev/null ||
			fail "SET m:$k failed"
	done
	load_leader 150 mp
	text=$(scrape "$leader") || fail "no metrics from the leader after the writes"
	local prop commit count sum
	prop=$(value "$text" apus_proposals_total)
	commit=$(value "$text" apus_commit_index)
	count=$(value "$text" apus_commit_latency_seconds_count)
	sum=$(value "$text" apus_commit_latency_seconds_sum)
	# 50 clients: an ACCEPT, a request and a CLOSE each, at least.
	[ "$prop" -ge $((before_prop + 100)) ] || fail "proposals_total $before_prop -> $prop"
	[ "$commit" -ge $((before_commit + 100)) ] || fail "commit_index $before_commit -> $commit"
	# commit_wait = reply times only the replies that had to wait.
	local want=50
	[ "${APUS_TEST_COMMIT_WAIT:-read}" = reply ] && want=1
	[ "$count" -ge $((before_count + want)) ] || fail "latency _count $before_count -> $count"
	awk -v a="$before_sum" -v b="$sum" 'BEGIN { exit !(b > a) }' || fail "latency _sum $before_sum -> $sum"
	assert_eq "$(value "$text" apus_commit_latency_seconds_bucket 'le="+Inf"')" "$count" "+Inf bucket vs _count"
	local bs
	bs=$(all_backups) || fail "not every other node is a backup"
	for n in $bs; do
		# 200 SETs of at least 20 bytes each went to every backup.
		local sent
		sent=$(value "$text" apus_peer_sent_bytes_total "peer=\"$n\"")
		[ "$sent" -ge $((before_sent[$n] + 4000)) ] ||
			fail "bytes sent to node $n: ${before_sent[$n]} -> $sent"
		# The backup executes what was committed.
		retry 50 0.2 metric_at_least "$n" apus_applied_index "$commit" ||
			fail "node $n: applied index did not reach $commit: $(metric "$n" apus_applied_index)"
	done
	wait_digests_equal "$CONF" 30
}

@test "a client of a backup's app port counts in its refused_clients_total" {
	local n before after leader lbefore
	n=$(backups | head -n 1)
	[ -n "$n" ] || fail "no backup"
	leader=$(leader_id)
	before=$(metric "$n" apus_refused_clients_total) || fail "no metrics from node $n"
	lbefore=$(metric "$leader" apus_refused_clients_total) || fail "no metrics from the leader"
	timeout 5 redis-cli -h "$(node_host "$n")" -p "$(app_port "$n")" PING >/dev/null 2>&1 || true
	timeout 5 redis-cli -h "$(node_host "$n")" -p "$(app_port "$n")" PING >/dev/null 2>&1 || true
	after=$(metric "$n" apus_refused_clients_total)
	[ "$after" -ge $((before + 2)) ] || fail "node $n: refused_clients_total $before -> $after"
	# Counted where they were refused, not on the leader.
	assert_eq "$(metric "$leader" apus_refused_clients_total)" "$lbefore" "leader's refused clients"
}

@test "another path is 404, another method 405, /metrics 200" {
	local n
	n=$(leader_id)
	assert_eq "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$(metrics_url "$n" /)")" 404 "GET /"
	assert_eq "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$(metrics_url "$n" /metricsx)")" 404 "GET /metricsx"
	assert_eq "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -X POST "$(metrics_url "$n")")" 405 "POST /metrics"
	assert_eq "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$(metrics_url "$n")")" 200 "GET /metrics"
}

@test "clients that send nothing do not block a scrape" {
	local n host port i fds=() fd
	n=$(leader_id)
	host=$(node_host "$n")
	port=$(conf_node_get "$CONF" "$n" metrics_port)
	# More stalled clients than the endpoint has slots.
	for ((i = 0; i < 10; i++)); do
		exec {fd}<>"/dev/tcp/$host/$port" || fail "cannot connect to $host:$port"
		fds+=("$fd")
	done
	printf 'GET /metr' >&"${fds[0]}"	# half a request line, never finished
	# Well within the endpoint's 5 s per client: the stalled ones wait aside.
	run curl -sS --fail --max-time 2 "$(metrics_url "$n")"
	for fd in "${fds[@]}"; do
		exec {fd}>&-
	done
	[ "$status" -eq 0 ] || fail "scrape with stalled clients failed: $output"
	grep -q '^apus_proposals_total{' <<<"$output" || fail "scrape incomplete: $output"
	# The server itself is untouched.
	run redis-cli -h "$host" -p "$(app_port "$n")" PING
	assert_eq "$output" PONG "PING on the leader"
}

@test "a backup whose metrics port is taken runs without metrics and says so" {
	local n port host pid blocker log
	n=$(backups | tail -n 1)
	[ -n "$n" ] || fail "no backup"
	host=$(node_host "$n")
	port=$(conf_node_get "$CONF" "$n" metrics_port)
	log="$(data_dir "$n")/apus.log"
	pid=$(redis_pid "$n")
	kill -KILL "$pid"
	wait_pids_gone 10 "$pid" || fail "node $n (pid $pid) did not die"
	local ns in=()
	ns=$(conf_node_get "$CONF" "$n" netns)
	if [ -n "$ns" ]; then
		in=(ip netns exec "$ns")
	fi
	"${in[@]}" python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); time.sleep(120)' "$host" "$port" 3>&- &
	blocker=$!
	retry 50 0.1 listening "$port" "$ns" || {
		kill "$blocker"
		fail "the blocker never listened on $port"
	}
	run timeout 60 "$APUS" start --config "$CONF" --node "$n" 3>&-
	local rc=$status out=$output
	local ok=0
	retry 50 0.2 role_is "$n" backup || ok=1
	kill "$blocker" 2>/dev/null
	wait "$blocker" 2>/dev/null || true
	[ "$rc" -eq 0 ] || fail "apus start --node $n failed: $out"
	[ "$ok" -eq 0 ] || fail "node $n did not come back as a backup"
	grep -q "no metrics endpoint: cannot listen on $host:$port" "$log" ||
		fail "node $n did not log the taken port: $(tail -n 20 "$log")"
	redis-cli -h "$(leader_host)" -p "$(leader_port)" SET after-restart yes >/dev/null
	wait_equal_on_all "$CONF" yes GET after-restart
	! curl -s --max-time 2 "$(metrics_url "$n")" >/dev/null || fail "node $n: metrics served on a taken port"
	# Restarted once more with its port free: the endpoint is back.
	pid=$(redis_pid "$n")
	kill -KILL "$pid"
	wait_pids_gone 10 "$pid" || fail "node $n (pid $pid) did not die"
	run timeout 60 "$APUS" start --config "$CONF" --node "$n" 3>&-
	[ "$status" -eq 0 ] || fail "apus start --node $n failed: $output"
	retry 50 0.2 metric_at_least "$n" apus_role 1 'role="backup"' ||
		fail "node $n: no metrics after a restart with its port free"
	# ... and it follows the leader again.
	retry 50 0.2 metric_is "$n" apus_leader_node "$(leader_id)" ||
		fail "node $n: does not follow leader $(leader_id): $(metric "$n" apus_leader_node)"
}

@test "apus checkpoint of a backup shows in its checkpoint metrics" {
	local n out
	command -v criu >/dev/null 2>&1 || skip "CRIU not installed (scripts/install-criu.sh builds one)"
	n=$(backups | head -n 1)
	[ -n "$n" ] || fail "no backup"
	assert_eq "$(metric "$n" apus_checkpoints_total)" 0 "node $n: checkpoints before"
	out=$(timeout 120 "$APUS" checkpoint --config "$CONF" --node "$n" 2>&1 3>&-) ||
		fail "apus checkpoint --node $n failed: $out"
	# The dump leaves the node running: its endpoint still answers.
	assert_eq "$(metric "$n" apus_checkpoints_total)" 1 "node $n: checkpoints after"
	metric_at_least "$n" apus_checkpoint_bytes 100000 || fail "node $n: image bytes $(metric "$n" apus_checkpoint_bytes)"
	awk -v d="$(metric "$n" apus_checkpoint_duration_seconds)" 'BEGIN { exit !(d > 0) }' ||
		fail "node $n: dump duration $(metric "$n" apus_checkpoint_duration_seconds)"
	redis-cli -h "$(leader_host)" -p "$(leader_port)" SET after-checkpoint yes >/dev/null
	wait_equal_on_all "$CONF" yes GET after-checkpoint
}

@test "a failover shows in elections_won_total and leader_changes_total" {
	local old new pid j n
	old=$(leader_id)
	pid=$(redis_pid "$old")
	kill -KILL "$pid"
	wait_pids_gone 10 "$pid" || fail "leader (pid $pid) did not die"
	retry 100 0.2 leader_other_than "$old" ||
		fail "no new leader after killing node $old"
	new=$(leader_id)
	assert_eq "$(metric "$new" apus_elections_won_total)" 1 "node $new: elections won"
	assert_eq "$(metric "$new" apus_role 'role="leader"')" 1 "node $new: role"
	for n in $(conf_nodes "$CONF"); do
		[ "$n" = "$old" ] && continue
		# Each survivor follows the new leader (apus status may name it a
		# moment before a backup heard from it), having seen leadership
		# move from the old leader's view to a newer one.
		retry 50 0.2 metric_is "$n" apus_leader_node "$new" ||
			fail "node $n: leader it knows: $(metric "$n" apus_leader_node), want $new"
		assert_eq "$(metric "$n" apus_leader_changes_total)" 1 "node $n: leader changes"
	done
	! curl -s --max-time 2 "$(metrics_url "$old")" >/dev/null || fail "the dead node still serves metrics"
	# The old leader comes back as a backup and serves metrics again.
	run timeout 60 "$APUS" start --config "$CONF" --node "$old" 3>&-
	[ "$status" -eq 0 ] || fail "apus start --node $old failed: $output"
	retry 50 0.2 metric_at_least "$old" apus_role 1 'role="backup"' ||
		fail "node $old: no backup role in its metrics after restart"
	redis-cli -h "$(leader_host)" -p "$(leader_port)" SET after-failover yes >/dev/null
	wait_equal_on_all "$CONF" yes GET after-failover
	j=$(metric "$old" apus_leader_changes_total)
	assert_eq "$j" 0 "restarted node $old: leader changes since its start"
}
