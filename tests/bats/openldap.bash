# Sourced by tests/bats/openldap.bats and tests/known/openldap.bats (after
# helpers.bash): a 3-replica slapd cluster of the file on LDAP_PORTBASE
# (20800 unless set before loading: ports PORTBASE+1..+3), made by
# apps/openldap/init.sh, and what its tests check it with.

LDAP_APP="$APUS_ROOT/apps/openldap"

have_slapd() {
	[ -x /usr/sbin/slapd ] && [ -x /usr/sbin/slapcat ] && [ -x /usr/sbin/slapadd ] &&
		command -v ldapmodify >/dev/null 2>&1 && command -v ldapsearch >/dev/null 2>&1
}

# ldap_conf DIR PORTBASE - apps/openldap/cluster-shm.conf with node i on
# PORTBASE+1+i, its data in DIR/n<i>, no guard (the tests kill servers on
# purpose) and no fsync.
ldap_conf() {
	local dir=$1 portbase=$2
	sed -e "s#/tmp/apus-openldap/node\([0-9]\)#$dir/n\1#" -e "s/^cluster .*/cluster = test$portbase/" \
		-e "s/= 740\([1-3]\)/= $((portbase / 10))\1/" -e "s/^guard .*/guard = off/" \
		-e "s/^fsync .*/fsync = none/" -e "s#{config_dir}#$LDAP_APP#g" \
		"$LDAP_APP/cluster-shm.conf" >"$dir/apus.conf"
	echo "$dir/apus.conf"
}

# kill_slapd_leftovers CONF - slapd processes of an aborted earlier run (on its ports).
kill_slapd_leftovers() { kill_named_on_ports "$1" slapd; }

# ldap_serving [CONF] - the leader answers a search over its app port.
ldap_serving() {
	local port host
	port=$(leader_port "${1:-$CONF}") && host=$(leader_host "${1:-$CONF}") || return 1
	timeout 5 ldapsearch -x -o nettimeout=2 -H "ldap://$host:$port" -D cn=admin,dc=apus,dc=test \
		-w secret -LLL -s base -b dc=apus,dc=test dn >/dev/null 2>&1
}

# digests_settled - digest.sh's lines did not change over 2 s (the backups
# are done), in $DIGESTS; its exit status (equal or not) in $DIGEST_RC.
digests_settled() {
	local a b
	a=$("$LDAP_APP/digest.sh" --config "$CONF")
	sleep 2
	b=$("$LDAP_APP/digest.sh" --config "$CONF")
	DIGEST_RC=$?
	DIGESTS=$b
	[ "$a" = "$b" ]
}

# show_ldif_diffs - each backup's database against node 0's: the lines
# that differ, counted by attribute, and the first of them.
show_ldif_diffs() {
	local i
	"$LDAP_APP/digest.sh" --config "$CONF" --dump "$BATS_TEST_TMPDIR/dump" >/dev/null || true
	for i in 1 2; do
		echo "node 0 vs node $i, differing lines by attribute:"
		diff "$BATS_TEST_TMPDIR/dump/node0.ldif" "$BATS_TEST_TMPDIR/dump/node$i.ldif" |
			grep '^[<>]' | cut -d: -f1 | sort | uniq -c | sort -rn | head -n 8
		diff "$BATS_TEST_TMPDIR/dump/node0.ldif" "$BATS_TEST_TMPDIR/dump/node$i.ldif" | head -n 12
	done
	grep -h 'request order given up\|differs from the leader' "$(data_dir 1)/apus.log" | head -n 3
}

setup_file() {
	have_slapd || return 0
	local dir
	dir=$(test_dir openldap)
	CONF=$(ldap_conf "$dir" "${LDAP_PORTBASE:-20800}")
	export CONF
	kill_slapd_leftovers "$CONF"
	"$LDAP_APP/init.sh" --config "$CONF" --force >/dev/null
	start_cluster "$CONF"
	retry 100 0.2 ldap_serving "$CONF"
}

teardown_file() {
	[ -n "${CONF:-}" ] || return 0
	stop_cluster "$CONF"
	kill_slapd_leftovers "$CONF"
	"$APUS_ROOT/scripts/drop-regions.sh" "$(dirname "$CONF")"
}

setup() {
	have_slapd || skip "test requires slapd and ldap-utils (apt-get install slapd ldap-utils)"
	if [ -n "${APUS_TEST_NETNS:-}" ]; then
		requires netns
	fi
}

# audit_then_restart LOG NODE - 30 audited adds and modifies (audit.sh,
# a connection per operation, its record in LOG), then apus stop and apus
# start of NODE: it comes back reset to the template and replays the log.
audit_then_restart() {
	APUS_BIN="$APUS" "$LDAP_APP/audit.sh" write --config "$CONF" --log "$1" --count 30 ||
		fail "audit.sh write failed"
	run timeout 60 "$APUS" stop --config "$CONF" --node "$2" 3>&-
	assert_eq "$status" 0 "apus stop --node $2: $output"
	run timeout 120 "$APUS" start --config "$CONF" --node "$2" 3>&-
	assert_eq "$status" 0 "apus start --node $2: $output"
}
