#!/usr/bin/env bats
# A virtual IP that follows the leader (issue 19): three redis-servers in
# network namespaces over tcp with leader_hook = scripts/leader-hooks/vip.sh;
# clients on the host use the VIP only. After start and after a kill -9 of
# the leader, exactly one namespace holds the VIP, the leader's, and a
# client at the VIP reads what was written before the failover.

# Namespaces, subnet and ports of this file's own (other suites use apust..
# on 10.78.0.0/24, the demo apus.. on 10.77.0.0/24).
export APUS_NETNS_PREFIX=apusv APUS_NETNS_SUBNET=10.79.0 APUS_TEST_NETNS=1
PORTBASE=19100

load helpers

HOOK="$APUS_ROOT/scripts/leader-hooks/vip.sh"
FAULT="$APUS_ROOT/scripts/fault.sh"
VIP=10.79.0.100
# For the direct runs of the hook, so that they never move the cluster's VIP.
VIP2=10.79.0.101

# release_all ADDR - remove ADDR from every namespace of the cluster.
function release_all() {
	local n
	for n in $(conf_nodes "$CONF"); do
		ip netns exec "$(conf_node_get "$CONF" "$n" netns)" "$HOOK" --release "$1/24" >/dev/null 2>&1 || true
	done
}

function setup_file() {
	have redis && have netns && have arping || return 0
	CONF=$(make_conf "$(test_dir cluster)" "$PORTBASE")
	export CONF
	# A VIP left behind by an aborted run would make two holders.
	release_all "$VIP"
	release_all "$VIP2"
	# Redis must accept clients at the VIP as well as at the node's
	# address; the shim tells the application port by its number alone.
	sed -i 's/--bind {address}/--bind 0.0.0.0/' "$CONF"
	sed -i "s|^app_cmd|leader_hook  = $HOOK $VIP/24\\napp_cmd|" "$CONF"
	start_cluster "$CONF"
}

function teardown_file() {
	stop_cluster "${CONF:-}"
	rm -f /dev/shm/apus-test"$PORTBASE"-*
	"$NETNS" down >/dev/null 2>&1 || true
}

function setup() {
	requires redis netns arping
}

# holders ADDR - the node ids whose namespace holds ADDR, space-separated.
function holders() {
	local n ns out=""
	for n in $(conf_nodes "$CONF"); do
		ns=$(conf_node_get "$CONF" "$n" netns)
		if ip -n "$ns" -o -4 addr show | grep -q " inet $1/"; then
			out+="$n "
		fi
	done
	echo "${out% }"
}

# wait_vip_on NODE [ADDR] - wait (15 s) until NODE's namespace, and only it,
# holds ADDR (default the VIP).
function wait_vip_on() {
	local i got addr=${2:-$VIP}
	for ((i = 0; i < 150; i++)); do
		got=$(holders "$addr")
		[ "$got" = "$1" ] && return 0
		sleep 0.1
	done
	show_logs "$CONF" 15 >&2
	fail "namespaces holding $addr: '$got', want only node $1's"
}

# at_vip CMD... - a redis command at the VIP, from the host.
function at_vip() {
	timeout 5 redis-cli -h "$VIP" -p "$(app_port 0)" "$@" 2>&1
}

@test "vip.sh: --help, and one clear line and a non-zero exit on bad arguments" {
	run "$HOOK" --help
	assert_eq "$status" 0 "exit of --help"
	[[ "$output" == *"leader_hook = "*"vip.sh"* ]] || fail "--help says no usage: $output"
	local args
	for args in "" "10.79.0.300/24" "10.79.0.100" "10.79.0.100/24 eth0 extra" "--bogus 10.79.0.100/24" "10.79.0.100/24 bad/dev"; do
		# shellcheck disable=SC2086 # the words are the arguments.
		run "$HOOK" $args
		assert_eq "$status" 1 "exit for arguments '$args'"
		assert_eq "${#lines[@]}" 1 "lines printed for arguments '$args' ($output)"
		[[ "$output" == "vip.sh: "* ]] || fail "no vip.sh: prefix for '$args': $output"
	done
	# Outside a leader_hook (no APUS_CONFIG), only --release makes sense.
	run env -u APUS_CONFIG -u APUS_LEADER "$HOOK" "$VIP2/24"
	assert_eq "$status" 1 "exit without APUS_CONFIG"
	[[ "$output" == *"APUS_CONFIG"* ]] || fail "does not name APUS_CONFIG: $output"
}

@test "vip.sh refuses a node's own address as the VIP and removes nothing" {
	local ns1 before
	ns1=$(conf_node_get "$CONF" 1 netns)
	before=$(ip -n "$ns1" -o -4 addr show)
	run ip netns exec "$(conf_node_get "$CONF" 0 netns)" env APUS_CONFIG="$CONF" APUS_LEADER=0 \
		"$HOOK" "$(node_host 1)/24"
	assert_eq "$status" 1 "exit for node 1's address as the VIP"
	[[ "$output" == *"node 1's own address"* ]] || fail "unclear refusal: $output"
	assert_eq "$(ip -n "$ns1" -o -4 addr show)" "$before" "node 1's addresses"
}

@test "after start exactly the leader's namespace holds the VIP, and a client at the VIP writes and reads" {
	local leader
	leader=$(leader_id)
	wait_vip_on "$leader"
	assert_eq "$(at_vip SET vip:start started)" OK "SET at the VIP"
	assert_eq "$(at_vip GET vip:start)" started "GET at the VIP"
	# The write went through the log: every replica has it.
	wait_equal_on_all "$CONF" started GET vip:start
	grep -q "^vip.sh: view [0-9]*: node $leader holds $VIP/24 on eth0" "$(data_dir "$leader")/apus.log" ||
		fail "no hook line in node $leader's apus.log: $(grep vip.sh "$(data_dir "$leader")/apus.log")"
	# arping takes 2 s after the address is in place.
	retry 50 0.1 grep -q "^vip.sh: .*announced $VIP on eth0" "$(data_dir "$leader")/apus.log" ||
		fail "the VIP was not announced: $(grep vip.sh "$(data_dir "$leader")/apus.log")"
}

@test "kill -9 the leader: the VIP moves to the new leader, which reads the value written before and takes writes" {
	local old value
	old=$(leader_id)
	wait_vip_on "$old"
	value="before-$RANDOM-$$"
	assert_eq "$(at_vip SET vip:failover "$value")" OK "SET at the VIP before the kill"
	"$FAULT" kill --config "$CONF" --node "$old"
	wait_new_leader "$old"
	wait_vip_on "$NEW"
	# The first client after the move may still race the announcement.
	retry 50 0.2 bash -c "[ \"\$(timeout 2 redis-cli -h $VIP -p $(app_port 0) GET vip:failover 2>&1)\" = '$value' ]" ||
		fail "GET at the VIP after the failover: '$(at_vip GET vip:failover)', want '$value'"
	assert_eq "$(at_vip SET vip:after moved)" OK "SET at the VIP after the failover"
	assert_eq "$(at_vip GET vip:after)" moved "GET at the VIP after the failover"
	grep -q "^vip.sh: view [0-9]*: removed $VIP/24 from eth0 (node $old, namespace " "$(data_dir "$NEW")/apus.log" ||
		fail "node $NEW did not take the VIP from node $old: $(grep vip.sh "$(data_dir "$NEW")/apus.log")"
	# The old leader comes back as a backup; the VIP stays with the leader.
	"$FAULT" restart --config "$CONF" --node "$old" 3>&-
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(status_node "$(status_json)" "$old" role)" = backup ] && break
		sleep 0.2
	done
	assert_eq "$(status_node "$(status_json)" "$old" role)" backup "role of the restarted node"
	assert_eq "$(leader_id)" "$NEW" "leader after the restart"
	assert_eq "$(holders "$VIP")" "$NEW" "namespaces holding the VIP after the restart"
	wait_equal_on_all "$CONF" moved GET vip:after
}

@test "vip.sh run twice is idempotent, and without arping it still moves the address and says so" {
	# The hook does not look at roles; VIP2 is not the cluster's.
	local a=1 b=2 shadow d path= out
	# A PATH with everything but arping: the folders without it as they
	# are, each one with it as links to all its other programs.
	for d in ${PATH//:/ }; do
		if [ -e "$d/arping" ]; then
			shadow="$BATS_TEST_TMPDIR/bin${#path}"
			mkdir -p "$shadow"
			find "$d" -maxdepth 1 ! -name arping \( -type f -o -type l \) -executable \
				-exec ln -sf -t "$shadow" {} +
			d=$shadow
		fi
		path+=${path:+:}$d
	done
	run env PATH="$path" bash -c 'command -v arping'
	[ "$status" -ne 0 ] || fail "arping still found through $path: $output"
	for node in "$a" "$b" "$b"; do
		run ip netns exec "$(conf_node_get "$CONF" "$node" netns)" env PATH="$path" \
			APUS_CONFIG="$CONF" APUS_LEADER="$node" APUS_VIEW=7 bash "$HOOK" "$VIP2/24"
		assert_eq "$status" 0 "exit of the hook on node $node: $output"
		[[ "$output" == *"vip.sh: view 7: no arping from iputils-arping"* ]] || fail "no word about arping: $output"
		assert_eq "$(holders "$VIP2")" "$node" "namespaces holding $VIP2 after the hook on node $node"
	done
	# The cluster's own VIP was not touched.
	assert_eq "$(holders "$VIP")" "$(leader_id)" "namespaces holding the cluster's VIP"
	# --release, twice.
	for out in removed "not held"; do
		run ip netns exec "$(conf_node_get "$CONF" "$b" netns)" "$HOOK" --release "$VIP2/24"
		assert_eq "$status" 0 "exit of --release"
		[[ "$output" == *"$out"* ]] || fail "--release: '$output', want '$out'"
	done
	assert_eq "$(holders "$VIP2")" "" "namespaces holding $VIP2 after --release"
}
