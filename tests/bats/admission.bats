#!/usr/bin/env bats
# Peer admission over tcp, with each replica in its own network namespace:
# a replica holding another cluster key, and a connection from an address
# the config does not name, are refused and logged, and nothing they send
# reaches a region; the rest of the cluster goes on.

load helpers

function setup_file() {
	have redis && have netns || return 0
	export APUS_TEST_NETNS=tcp-netns
	CONF=$(make_conf "$(test_dir cluster)" 17800)
	export CONF
	# Node 2 gets a key of its own: it is not part of this cluster.
	local other
	other="$(data_dir 2)/other.key"
	sed -i "/^\[node 2\]/a secret_file = $other" "$CONF"
	start_cluster "$CONF"
}

function setup() {
	requires redis netns
}

# log_has NODE PATTERN - NODE's apus.log matches the extended regex PATTERN.
function log_has() {
	grep -qE "$2" "$(data_dir "$1")/apus.log"
}

@test "start generated the cluster key and node 2's key, mode 0600" {
	local k
	for k in "$(dirname "$CONF")/apus.key" "$(data_dir 2)/other.key"; do
		[ -f "$k" ] || fail "no key file $k"
		assert_eq "$(stat -c %a "$k")" 600 "mode of $k"
		grep -qxE '[0-9a-f]{64}' "$k" || fail "$k does not hold 64 hex digits"
	done
	! cmp -s "$(dirname "$CONF")/apus.key" "$(data_dir 2)/other.key" || fail "the keys are equal"
}

@test "a replica with another cluster key is refused both ways and learns nothing" {
	local port i j
	port=$(leader_port)
	for i in $(seq 1 50); do
		redis-cli -h "$(leader_host)" -p "$port" SET "k$i" "v$i" >/dev/null
	done
	# Node 1 holds the majority with the leader.
	wait_equal_on_all_of "0 1" 50 DBSIZE
	assert_eq "$(admin 2 DBSIZE)" 0 "keys on the refused node 2"
	j=$(status_json)
	assert_eq "$(status_node "$j" 2 applied)" 0 "entries applied by node 2"
	# The leader refused node 2's connection, and node 2 the leader's.
	retry 20 0.5 log_has 0 "refused a peer connection from $(node_host 2):[0-9]+: .*(cluster secret)"
	retry 20 0.5 log_has 2 "refused a peer connection from $(node_host 0):[0-9]+: .*(cluster secret)"
	log_has 0 "node 2 \\($(node_host 2):[0-9]+\\) is unreachable: it does not know our cluster secret" ||
		fail "the leader did not say why node 2 is unreachable"
}

@test "a connection from an address not in the config is refused; its frames land nowhere" {
	local peer commit_before rc=0 fd
	peer=$(conf_node_get "$CONF" 0 peer_port)
	commit_before=$(status_node "$(status_json)" 0 commit)
	# From this host's bridge address: a hello claiming to be node 1, then
	# a frame that would overwrite the start of the log.
	exec {fd}<>"/dev/tcp/$(node_host 0)/$peer"
	printf 'SUPA\x02\x00\x01\x000123456789abcdef\x01\x00\x00\x00\x00\x00\x00\x00' >&"$fd"
	printf '\x00\x10\x00\x00\x00\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00XXXXXXXX' >&"$fd" || true
	IFS= read -r -t 5 -u "$fd" _ || rc=$?
	exec {fd}>&-
	[ "$rc" -eq 1 ] || fail "the leader kept the connection open (read status $rc)"
	retry 20 0.5 log_has 0 "refused a peer connection from [0-9.]+:[0-9]+: not node 1's address"
	# The cluster is unharmed.
	run redis-cli -h "$(leader_host)" -p "$(leader_port)" INCR after-intruder
	assert_eq "$output" 1 "INCR after the intrusion"
	wait_equal_on_all_of "0 1" 1 GET after-intruder
	[ "$(status_node "$(status_json)" 0 commit)" -gt "$commit_before" ] || fail "commit did not move"
}
