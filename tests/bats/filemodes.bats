#!/usr/bin/env bats
# The files apus trusts (coordinator/storage/filemode.h) are private: a region, its
# durable copy and the cluster key are made 0600, a data directory apus
# creates 0700; one that others could have written (or that another user
# owns) is refused with one line that says what to do, and nothing of the
# node starts, while the node's state stays there for when it is fixed.
# tcp on 127.0.0.1, so that the cluster has a key.

load helpers

setup() {
	requires redis
	need_apus
	DIR=$(test_dir "t$BATS_TEST_NUMBER")
	CONF=$(APUS_TEST_TRANSPORT=tcp APUS_TEST_FSYNC=always make_conf "$DIR" 19800)
	KEY="$(dirname "$CONF")/apus.key"
}

teardown() {
	stop_cluster "$CONF"
}

# write KEY VALUE - SET through the leader's application port (replicated).
function write() {
	assert_eq "$(timeout 10 redis-cli -h 127.0.0.1 -p "$(leader_port)" SET "$1" "$2")" OK "SET $1"
}

# mode PATH - the octal mode of PATH (through links).
function mode() { stat -L -c %a "$1"; }

# expect_refused WHAT_REGEX - apus start exits 1 with one line matching
# WHAT_REGEX, and no node of the cluster runs.
function expect_refused() {
	local n p
	run timeout 60 "$APUS" start --config "$CONF" 3>&-
	[ "$status" -eq 1 ] || fail "apus start: exit $status, want 1; output: $output"
	[ "${#lines[@]}" -eq 1 ] || fail "apus start: want one line, got ${#lines[@]}: $output"
	[[ "$output" =~ $1 ]] || fail "apus start said: $output (want /$1/)"
	for n in $(conf_nodes "$CONF"); do
		p=$(redis_pid "$n") || p=
		[ -z "$p" ] || ! kill -0 "$p" 2>/dev/null || fail "node $n (pid $p) runs after the refusal"
	done
}

@test "a new cluster's region, durable copy, key and data directories are private" {
	rm -rf "$DIR"/n*	# apus start makes them
	start_cluster "$CONF"
	write k v
	assert_eq "$(mode "$KEY")" 600 "mode of the cluster key"
	for n in 0 1 2; do
		assert_eq "$(mode "$DIR/n$n")" 700 "mode of node $n's data directory"
		assert_eq "$(mode "$DIR/n$n/apus.region")" 600 "mode of node $n's region"
		assert_eq "$(mode "$DIR/n$n/apus.wal")" 600 "mode of node $n's durable copy"
	done
}

@test "a region others may write, or another user owns, is refused in one line; fixed, the node comes back with its state" {
	local region
	start_cluster "$CONF"
	write k before
	wait_digests_equal "$CONF" 30
	timeout 60 "$APUS" stop --config "$CONF" >/dev/null 3>&-
	region=$(readlink -f "$DIR/n1/apus.region")
	[ -f "$region" ] || fail "node 1 has no region file to test with ($region)"

	chmod 666 "$region"
	expect_refused "^apus: node 1: region file .*apus\.region has mode 0666, which lets others write it: refusing it \(chmod 600 "
	chmod 600 "$region"
	chown nobody "$region"
	expect_refused "^apus: node 1: region file .* is owned by uid [0-9]+, not by this user"
	chown "$(id -u)" "$region"

	start_cluster "$CONF"
	assert_eq "$(admin 1 GET k)" before "node 1's state after the fix"
}

@test "started without the CLI, the node itself refuses such a region and says so in its log" {
	local region pid
	start_cluster "$CONF"
	timeout 60 "$APUS" stop --config "$CONF" >/dev/null 3>&-
	region=$(readlink -f "$DIR/n0/apus.region")
	chmod 646 "$region"
	(cd "$DIR/n0" && LD_PRELOAD="$(dirname "$APUS")/../lib/libapus.so" APUS_CONFIG="$CONF" APUS_NODE=0 \
		exec redis-server --port 19801 --bind 127.0.0.1 --save "" --daemonize no \
		>"$DIR/direct.log" 2>&1 3>&-) &
	pid=$!
	retry 50 0.1 grep -q "refusing application clients" "$DIR/direct.log"
	kill "$pid" 2>/dev/null || true
	grep -q "region file .* has mode 0646, which lets others write it" "$DIR/direct.log" ||
		fail "no reason in the node's log: $(cat "$DIR/direct.log")"
	assert_eq "$(mode "$region")" 646 "the refused region was left as it was"
}

@test "a cluster key others may read is refused in one line" {
	start_cluster "$CONF"
	timeout 60 "$APUS" stop --config "$CONF" >/dev/null 3>&-
	chmod 644 "$KEY"
	expect_refused "^apus: node 0: cluster key $KEY has mode 0644, which lets others read or write it: refusing it \(chmod 600 "
}

@test "a checkpoint directory others may write is never restored" {
	mkdir -p "$DIR/n1/checkpoints"
	chmod 777 "$DIR/n1/checkpoints"
	run timeout 60 "$APUS" restore --config "$CONF" --node 1 3>&-
	[ "$status" -eq 1 ] || fail "apus restore: exit $status, want 1; output: $output"
	[[ "$output" == *"checkpoint directory $DIR/n1/checkpoints has mode 0777, which lets others write it: refusing it (chmod 700 "* ]] ||
		fail "apus restore said: $output"
}
