#!/usr/bin/env bats
# A 1 MB log carrying 200 MB of writes: the log wraps around ~200 times and
# replicas must neither lose nor repeat an entry.

load helpers

REQUESTS=50000

setup_file() {
	# The wrap mechanics, without snapshots: durability.bats wraps a log
	# with them (a 256 KB value per quarter of the log would make every
	# request wait for one).
	APUS_TEST_SNAPSHOTS=off file_cluster 17500 1M
}

@test "200 MB through a 1 MB log: digests equal, commit counts every request" {
	# 50,000 SETs of 4 KB values over 1,000 keys.
	bench -t set -n "$REQUESTS" -d 4096 -r 1000 -c 20 -q
	local leader keys j commit
	leader=$(leader_id)
	keys=$(admin "$leader" DBSIZE)
	[ "$keys" -gt 900 ] || fail "leader holds $keys keys, want ~1000"
	wait_digests_equal "$CONF" 30
	j=$(status_json)
	commit=$(status_node "$j" "$leader" commit)
	[[ "$commit" =~ ^[0-9]+$ ]] || fail "no commit for the leader in: $j"
	[ "$commit" -ge "$REQUESTS" ] || fail "commit $commit < $REQUESTS requests: $j"
	retry 50 0.2 backups_applied "$REQUESTS" || fail "backups lag: $(status_json)"
}

# backups_applied N - every backup reports applied >= N.
function backups_applied() {
	local j n a
	j=$(status_json) || return 1
	local bs
	bs=$(all_backups) || fail "not every other node is a backup"
	for n in $bs; do
		a=$(status_node "$j" "$n" applied)
		[[ "$a" =~ ^[0-9]+$ ]] && [ "$a" -ge "$1" ] || return 1
	done
}

@test "values a quarter of the log's size cross the wrap point" {
	# 256 KB values: each wrap must cut or skip an entry that does not fit.
	bench -t set -n 2000 -d 262144 -r 50 -c 4 -q
	wait_equal_on_all "$CONF" 262144 STRLEN "key:000000000001"
	wait_digests_equal "$CONF" 60
}
