#!/usr/bin/env bash
# Run the unit tests (build/tests/unit/test_*, exit 0 pass / 1 fail / 77 skip)
# and then the bats suites (tests/bats/*.bats). An optional argument keeps
# only the files whose name contains it. Ends with one summary line:
#   N passed, N failed, N skipped
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

filter=${1:-}
UNIT_TIMEOUT=${APUS_UNIT_TIMEOUT:-120}
BATS_TIMEOUT=${APUS_BATS_TIMEOUT:-900}

passed=0
failed=0
skipped=0
failures=()

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

matches() { [ -z "$filter" ] || [[ "$1" == *"$filter"* ]]; }

# make test-asan: the servers' libapus.so and the CLI write sanitizer
# reports (ASAN_OPTIONS/UBSAN_OPTIONS log_path) into APUS_SANITIZER_LOG_DIR;
# each one is a failure of the suite that made it.
report_sanitizer_logs() {
	local dir=${APUS_SANITIZER_LOG_DIR:-} r
	[ -n "$dir" ] || return 0
	mkdir -p "$dir/reported"
	for r in "$dir"/*; do
		[ -f "$r" ] || continue
		echo "FAIL $1: sanitizer report ${r##*/}"
		sed -n '1,40s/^/    /p' "$r"
		failed=$((failed + 1))
		failures+=("$1: sanitizer report ${r##*/}")
		mv "$r" "$dir/reported/"
	done
}

# ---- unit tests ------------------------------------------------------------
shopt -s nullglob
# build/tsan, build/asan: the same tests built with SANITIZE=thread and with
# SANITIZE=address,undefined (make test builds them).
export TSAN_OPTIONS="halt_on_error=1 exitcode=1 report_thread_leaks=0 ${TSAN_OPTIONS:-}"
for t in build/tests/unit/test_* build/tsan/tests/unit/test_* build/asan/tests/unit/test_*; do
	if [ ! -f "$t" ] || [ ! -x "$t" ]; then
		continue
	fi
	name=${t##*/}
	case $t in
	build/tsan/* | build/asan/*)
		# Preloads the uninstrumented libapus.so: not a sanitizer test.
		[ "$name" = test_preload_early ] && continue
		name=${t#build/}
		name=${name%%/*}/${t##*/}
		;;
	esac
	matches "$name" || continue
	out="$tmp/${name//\//_}.out"
	rc=0
	timeout --kill-after=10 "$UNIT_TIMEOUT" "$t" >"$out" 2>&1 </dev/null || rc=$?
	# The TSan runtime cannot map its shadow memory on kernels with a
	# large mmap randomisation (vm.mmap_rnd_bits): the same test again
	# with address-space randomisation off.  It fails if it still cannot.
	if [ "$rc" -ne 0 ] && grep -q '^FATAL: ThreadSanitizer' "$out"; then
		rc=0
		timeout --kill-after=10 "$UNIT_TIMEOUT" setarch "$(uname -m)" -R "$t" >"$out" 2>&1 </dev/null || rc=$?
	fi
	case $rc in
	0)
		echo "ok   unit/$name"
		passed=$((passed + 1))
		;;
	77)
		reason=$(tail -n 1 "$out")
		echo "skip unit/$name${reason:+ ($reason)}"
		skipped=$((skipped + 1))
		;;
	*)
		what="exit $rc"
		[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && what="timed out after ${UNIT_TIMEOUT}s"
		echo "FAIL unit/$name ($what)"
		sed 's/^/    /' "$out"
		failed=$((failed + 1))
		failures+=("unit/$name")
		;;
	esac
done

report_sanitizer_logs unit
echo "     (unit: $SECONDS s)"

# ---- bats ------------------------------------------------------------------
# Each run is FILE or FILE|VAR=VALUE[|FILTER]: the same tests again under
# another setting (a parameter of the tests, not a copy of them); FILTER, a
# bats --filter regex, keeps the variant to the tests whose work the setting
# changes (make test-full runs them all).  The variants run
# where the setting changes what the tests exercise: another replay path
# (sockets), commit wait, fsync, a region on disk, and tcp across network
# namespaces for the transport's own work (connections, the log's ring
# across its wrap, reconnection after faults and failovers, CRIU with tcp
# peers).  APUS_TEST_ALL_VARIANTS=1 (make test-full) adds the suites whose
# tcp runs repeat what those already cover, and the tests tagged soak
# (`# bats test_tags=soak`: longer runs of what other tests cover), at ~20
# minutes more.
VARIANTS=(
	"digest.bats|APUS_TEST_PATH=sockets"
	"connections.bats|APUS_TEST_COMMIT_WAIT=reply"
	"basic.bats|APUS_TEST_FSYNC=always"
	# the region a disk file written back by msync (region_dir = none)
	"basic.bats|APUS_TEST_REGION_DIR=none"
	"wraparound.bats|APUS_TEST_REGION_DIR=none"
	# tcp with each replica in its own network namespace (scripts/netns.sh):
	# the ring across its wrap, a partition (kills and reconnection are
	# failover's)
	"wraparound.bats|APUS_TEST_NETNS=tcp-netns"
	"faults.bats|APUS_TEST_NETNS=tcp-netns|^partition"
	# over tcp, what the transport does in a failover: reconnection after
	# a kill and a whole-cluster restart, a paused leader's stale frames,
	# a partition (the repeated kills, the fork child and the hook are the
	# shm run's)
	"failover.bats|APUS_TEST_NETNS=tcp-netns|^(kill -9 the leader under|a paused leader is replaced|whole-cluster kill|partition the leader)"
	# (a restored backup's reconnection; refusals and CRIU's absence are
	# the same over any transport)
	"checkpoint.bats|APUS_TEST_NETNS=tcp-netns|^(a backup checkpointed under|the guard checkpoints a backup)"
	# the shipped tcp configs of the servers whose other tests use their
	# shm configs: apps/clamav/cluster-tcp.conf and
	# apps/openldap/cluster-tcp.conf, kill -9 of all after the log wrapped
	"clamav.bats|APUS_TEST_NETNS=tcp-netns|^clamav: (a new signature|kill -9 of all three)"
	"openldap.bats|APUS_TEST_NETNS=tcp-netns|^openldap as shipped"
)
if [ -n "${APUS_TEST_ALL_VARIANTS:-}" ]; then
	VARIANTS+=(
		"digest.bats|APUS_TEST_COMMIT_WAIT=reply"
		# the checker's output side is the same on both replay paths
		# (digest[sockets] runs the input side)
		"checker.bats|APUS_TEST_PATH=sockets"
		# what basic and commit_wait do over tcp, the tcp runs of
		# wraparound, failover and checkpoint do too
		"basic.bats|APUS_TEST_NETNS=tcp-netns"
		"commit_wait.bats|APUS_TEST_NETNS=tcp-netns"
		"digest.bats|APUS_TEST_NETNS=tcp-netns"
		"connections.bats|APUS_TEST_NETNS=tcp-netns"
		"rebuild.bats|APUS_TEST_NETNS=tcp-netns"
		"durability.bats|APUS_TEST_NETNS=tcp-netns"
		"metrics.bats|APUS_TEST_NETNS=tcp-netns"
		"verify.bats|APUS_TEST_NETNS=tcp-netns"
		"membership.bats|APUS_TEST_NETNS=tcp-netns"
		"recovery.bats|APUS_TEST_NETNS=tcp-netns"
	)
fi
bats_files=()
for f in tests/bats/*.bats; do
	matches "${f##*/}" && bats_files+=("$f")
done
for v in "${VARIANTS[@]}"; do
	matches "${v%%|*}" && bats_files+=("tests/bats/$v")
done

if [ "${#bats_files[@]}" -gt 0 ] && ! command -v bats >/dev/null 2>&1; then
	echo "FAIL bats (not installed; run scripts/install-deps.sh)"
	failed=$((failed + 1))
	failures+=("bats")
	bats_files=()
fi

# Test clusters keep their regions in memory (region_dir, what a stopped
# cluster still holds for its restart).  Each run's are in a directory of
# its own, dropped when it ends; what a test put in /dev/shm itself goes at
# the end.  Only the tests' own (helpers.bash names their clusters
# test<PORT>): other clusters on this machine keep theirs.
regions_before=$(ls /dev/shm/apus-test*.region 2>/dev/null)
drop_test_regions() {
	local r
	for r in /dev/shm/apus-test*.region; do
		[ -e "$r" ] && ! grep -qxF "$r" <<<"$regions_before" || continue
		# Mapped by a live process: another run's cluster (the same test
		# names its clusters the same), not ours to drop.
		fuser -s "$r" 2>/dev/null && continue
		rm -f "$r"
	done
}

# The first lines of a failed test's own message, kept for the summary at
# the end (CI shows a log's head and tail: the middle, where the full
# diagnostics are, may be cut). bats's stack trace lines are left out.
why_lines=0
note_why() {
	local l=${1#\#}
	l=${l#"${l%%[![:space:]]*}"}
	case $l in
	"" | "(from function"* | "from function"* | "in test file"* | "\`"*) return ;;
	esac
	[ "$why_lines" -ge 6 ] && return
	why_lines=$((why_lines + 1))
	failures[${#failures[@]} - 1]+=$'\n      '"${l:0:400}"
}

# ---- the suites in lanes ---------------------------------------------------
# APUS_TEST_JOBS lanes (default 1) run suites side by side.  On 2 cores the
# load tests saturate both, so 2 lanes saved only ~10% of the wall time
# (each suite ran ~1.75x slower) and timing-bound tests grew flaky (owner's
# guard-vs-restore race): one lane by default; more on bigger machines.  Runs that would meet
# stay in one group, which one lane runs in order: a file and its variants
# (the same ports and cluster names), every run in network namespaces (one
# set of namespaces), rebuild and recovery (ports 18600-18699).  Each run
# gets a region directory of its own (APUS_TEST_SHM, helpers.bash), dropped
# when it ends: a stopped cluster of another run keeps its regions.  The
# biggest groups go first.  With sanitizer reports to tell apart, one lane.
JOBS=${APUS_TEST_JOBS:-1}
[ -n "${APUS_SANITIZER_LOG_DIR:-}" ] && JOBS=1
# Rough seconds of the longer suites (2 cores): only the order of the queue.
declare -A EST=([durability]=200 [owner]=150 [rebuild]=150 [recovery]=150 [failover]=110
	[membership]=110 [hostile]=100 [iothreads]=90 [mariadb]=85 [digest]=65 [memcached]=55
	[vip]=40 [verify]=35 [faults]=35 [checker]=25 [checkpoint]=30 [metrics]=30 [install]=26)
netns_files=" "
for run in "${bats_files[@]}"; do
	[[ "$run" == *"|APUS_TEST_NETNS="* ]] && netns_files+="${run%%|*} "
done
declare -A group_runs group_est
groups=()
for i in "${!bats_files[@]}"; do
	run=${bats_files[i]}
	f=${run%%|*}
	base=${f##*/}
	base=${base%.bats}
	case " $netns_files " in
	*" $f "*) g=netns ;;
	*) case $base in rebuild | recovery) g=criu-ports ;; *) g=$base ;; esac ;;
	esac
	[ -n "${group_runs[$g]+x}" ] || groups+=("$g")
	group_runs[$g]+="$i "
	group_est[$g]=$((${group_est[$g]:-0} + ${EST[$base]:-20}))
done
mapfile -t groups < <(for g in "${groups[@]}"; do echo "${group_est[$g]} $g"; done | sort -rn | cut -d' ' -f2)

shm_root=/dev/shm/apus-tests.$$
echo 0 >"$tmp/queue.next"
: >"$tmp/done"

# next_group - the index of the next group in the queue (one lane takes it).
next_group() {
	flock "$tmp/queue.lock" bash -c 'read -r n <"$1"; echo $((n + 1)) >"$1"; echo "$n"' _ "$tmp/queue.next"
}

# run_suite I - bats on run I, its output in $tmp/run.I; "I RC SECONDS" to $tmp/done.
run_suite() {
	local i=$1 run=${bats_files[$1]} f setting= filter=() shm=$shm_root/$1 start=$SECONDS rc=0
	f=${run%%|*}
	[ "$run" != "$f" ] && setting=${run#*|}
	if [[ "$setting" == *"|"* ]]; then
		[ -z "${APUS_TEST_ALL_VARIANTS:-}" ] && filter=(--filter "${setting#*|}")
		setting=${setting%%|*}
	fi
	# Tests tagged soak (longer runs of what others cover) are make
	# test-full's.
	[ -z "${APUS_TEST_ALL_VARIANTS:-}" ] && filter+=(--filter-tags '!soak')
	mkdir -p "$shm"
	env ${setting:+"$setting"} APUS_TEST_SHM="$shm" timeout --kill-after=30 "$BATS_TIMEOUT" \
		bats --tap --timing "${filter[@]}" "$f" >"$tmp/run.$i" 2>&1 </dev/null || rc=$?
	rm -rf "$shm"
	echo "$i $rc $((SECONDS - start))" >>"$tmp/done"
}

run_lane() {
	local k i
	while k=$(next_group) && [ "$k" -lt "${#groups[@]}" ]; do
		for i in ${group_runs[${groups[$k]}]}; do
			run_suite "$i"
		done
	done
}

# untimed NAME - a TAP test name without bats --timing's " in Nms" (kept,
# with the suite, in $tmp/timings for the slowest tests at the end).
untimed() {
	local n=$1 rest="" ms
	[[ "$n" == *" # skip"* ]] && rest=" # skip${n#* # skip}" && n=${n%% # skip*}
	if [[ "$n" =~ ^(.*)\ in\ ([0-9]+)ms$ ]]; then
		n=${BASH_REMATCH[1]} ms=${BASH_REMATCH[2]}
		echo "$ms $suite: $n" >>"$tmp/timings"
	fi
	echo "$n$rest"
}

# report_suite I RC SECONDS - what run I's TAP says, counted.
report_suite() {
	local i=$1 rc=$2 secs=$3 run=${bats_files[$1]} f setting= suite line name reason n
	local plan=0 seen=0 in_fail=0 timed_out=0
	f=${run%%|*}
	[ "$run" != "$f" ] && setting=${run#*|}
	setting=${setting%%|*}
	suite=${f##*/}
	suite=${suite%.bats}${setting:+[${setting#*=}]}
	while IFS= read -r line; do
		case $line in
		1..*)
			plan=${line#1..}
			;;
		"not ok "*)
			seen=$((seen + 1))
			name=${line#not ok }
			name=$(untimed "${name#* }")
			echo "FAIL $suite: $name"
			failed=$((failed + 1))
			failures+=("$suite: $name")
			in_fail=1
			why_lines=0
			;;
		"ok "*)
			seen=$((seen + 1))
			name=${line#ok }
			name=$(untimed "${name#* }")
			in_fail=0
			if [[ "$name" == *" # skip"* ]]; then
				reason=${name#* # skip}
				reason=${reason# }
				echo "skip $suite: ${name%% # skip*}${reason:+ ($reason)}"
				skipped=$((skipped + 1))
			else
				echo "ok   $suite: $name"
				passed=$((passed + 1))
			fi
			;;
		*)
			# Diagnostics of a failed test (bats prefixes them with '# '),
			# or stray output outside any test: show it, it explains.
			if [ "$in_fail" -eq 1 ] || [[ "$line" != "#"* ]]; then
				echo "    $line"
			fi
			[ "$in_fail" -eq 1 ] && note_why "$line"
			;;
		esac
	done <"$tmp/run.$i"
	report_sanitizer_logs "$suite"
	echo "     ($suite: $secs s)"
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		timed_out=1
		echo "FAIL $suite (timed out after ${BATS_TIMEOUT}s)"
	fi
	# Tests the plan announced but that never reported (timeout, crash).
	if [ "$seen" -lt "$plan" ]; then
		n=$((plan - seen))
		echo "FAIL $suite: $n test(s) did not run (bats exit $rc)"
		failed=$((failed + n))
		failures+=("$suite: $n test(s) did not run")
	elif [ "$timed_out" -eq 1 ]; then
		# Every test reported but teardown hung: still a defect.
		failed=$((failed + 1))
		failures+=("$suite: timed out")
	elif [ "$rc" -ne 0 ] && [ "$seen" -eq 0 ]; then
		echo "FAIL $suite (bats exit $rc, no test reported)"
		failed=$((failed + 1))
		failures+=("$suite")
	fi
}

lanes=()
if [ "${#bats_files[@]}" -gt 0 ]; then
	for ((l = 0; l < JOBS; l++)); do
		run_lane &
		lanes+=($!)
	done
fi
# Each suite is reported when it ends, whole (lanes do not interleave).
reported=0
declare -A done_runs
while [ "$reported" -lt "${#bats_files[@]}" ]; do
	new=0
	while read -r i rc secs; do
		[ -n "${done_runs[$i]+x}" ] && continue
		done_runs[$i]=1
		report_suite "$i" "$rc" "$secs"
		reported=$((reported + 1))
		new=1
	done <"$tmp/done"
	[ "$new" -eq 1 ] && continue
	alive=0
	for l in "${lanes[@]}"; do kill -0 "$l" 2>/dev/null && alive=1; done
	if [ "$alive" -eq 0 ]; then
		# A lane that died leaves runs that never reported.
		grep -q . "$tmp/done" && sleep 0.2
		[ "$(wc -l <"$tmp/done")" -gt "$reported" ] && continue
		echo "FAIL bats: $((${#bats_files[@]} - reported)) run(s) never reported (a lane died)"
		failed=$((failed + ${#bats_files[@]} - reported))
		failures+=("bats: runs never reported")
		break
	fi
	sleep 1
done
wait
rm -rf "$shm_root"
drop_test_regions
# The namespaces the netns runs made (the tests' own prefix, see helpers.bash).
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1; then
	APUS_NETNS_PREFIX="${APUS_NETNS_PREFIX:-apust}" scripts/netns.sh down >/dev/null 2>&1 || true
fi

if [ -s "$tmp/timings" ]; then
	echo "     slowest tests (s):"
	sort -rn "$tmp/timings" | head -n 12 | awk '{ ms = $1; $1 = ""; printf "     %6.1f %s\n", ms / 1000, substr($0, 2) }'
	# Every test's time (ms), for whoever trims the run.
	[ -n "${APUS_TEST_TIMINGS:-}" ] && sort -rn "$tmp/timings" >"$APUS_TEST_TIMINGS"
fi
echo "     (all: $SECONDS s)"
if [ "${#failures[@]}" -gt 0 ]; then
	echo
	echo "failed:"
	printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
