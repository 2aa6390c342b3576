#!/usr/bin/env bats
# shellcheck disable=SC2154 # status and output are set by bats' run.
# tests/known/: tests of what users need that FAIL today, each naming the
# bug (not part of make test; `bats tests/known/`).  The cluster is
# tests/bats/openldap.bash's, on ports 20851-20853.
#
# Here: clients that open a connection per operation (bind, one add or
# modify, unbind: apps/openldap/audit.sh).  Every acknowledged write is on
# every replica (tests/bats/openldap.bats), but operational attributes
# differ: an add that reaches slapd while the bind before it still ends
# is deferred ("deferring operation: binding") and run later by another
# worker thread, outside the window of the read that got it, so its
# entryCSN, createTimestamp and entryUUID time fields take each replica's
# own clock (apps/openldap/README.md, "What still differs").

LDAP_PORTBASE=20850

load ../bats/helpers
load ../bats/openldap

@test "openldap: a connection per operation (audit.sh), and a backup that replays the log: slapcat digests equal on every replica" {
	local i
	audit_then_restart "$BATS_TEST_TMPDIR/audit.log" "$(all_backups | head -n 1)"
	for ((i = 0; i < 60; i++)); do
		digests_settled && break
	done
	echo "$DIGESTS"
	[ "$DIGEST_RC" -eq 0 ] && return 0
	show_ldif_diffs
	fail "the replicas' databases differ"
}
