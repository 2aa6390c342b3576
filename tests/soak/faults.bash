# The soaks' faults (sourced by tests/soak/*.bats after ../bats/helpers).

# kill_all - kill -9 every node's server (their guards bring them back).
function kill_all() {
	local n
	for n in $(conf_nodes "$CONF"); do
		kill -KILL "$(redis_pid "$n")" 2>/dev/null || true
	done
}

# max_log_pos - the largest log_pos apus status shows.
function max_log_pos() {
	local j n p max=0
	j=$(status_json) || return 1
	for n in $(conf_nodes "$CONF"); do
		p=$(status_node "$j" "$n" log_pos) || continue
		[[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -gt "$max" ] && max=$p
	done
	echo "$max"
}

# inject ROUND - one round's fault: kill-all, stop-start (apus stop, then
# apus start; the caller's t0 is set between them: a serve bound counts
# from the start), kill-leader, kill-backup or pause-leader (SIGSTOP, 2 s).
function inject() {
	local p
	case $1 in
	kill-all) kill_all ;;
	stop-start)
		run timeout 60 "$APUS" stop --config "$CONF" 3>&-
		assert_eq "$status" 0 "apus stop: $output"
		t0=$SECONDS
		run timeout 120 "$APUS" start --config "$CONF" 3>&-
		assert_eq "$status" 0 "apus start: $output"
		;;
	kill-leader) kill -KILL "$(redis_pid "$(leader_id)")" ;;
	kill-backup) kill -KILL "$(redis_pid "$(backups | head -n 1)")" ;;
	pause-leader)
		p=$(redis_pid "$(leader_id)")
		kill -STOP "$p"
		sleep 2
		kill -CONT "$p"
		;;
	*) fail "unknown round $1" ;;
	esac
}

# keep_logs - in a teardown, after a failed test only (every test with
# SOAK_KEEP_LOGS=always): copies every node's
# logs (apus.log, the guard's, its checkpoints' CRIU logs, gdb stacks of live servers) to
# $SOAK_LOG_DIR (default /tmp/apus-soak-logs)/<file>-<time>/n<N>/, since
# bats drops the test's directories; says where.
function keep_logs() {
	[ -n "${CONF:-}" ] || return 0
	[ -z "${BATS_TEST_COMPLETED:-}" ] || [ "${SOAK_KEEP_LOGS:-}" = always ] || return 0
	local dest n d pid
	dest="${SOAK_LOG_DIR:-/tmp/apus-soak-logs}/$(basename "$BATS_TEST_FILENAME" .bats)-$(date +%Y%m%d-%H%M%S)"
	for n in $(conf_nodes "$CONF"); do
		d=$(data_dir "$n")
		mkdir -p "$dest/n$n"
		cp "$d"/apus*.log "$dest/n$n/" 2>/dev/null
		(cd "$d" && find checkpoints -name '*.log' -exec cp --parents -t "$dest/n$n" {} +) 2>/dev/null
		# A stuck server's threads, where it still runs (gdb, if installed).
		pid=$(cat "$d/apus.pid" 2>/dev/null)
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && command -v gdb >/dev/null; then
			timeout 30 gdb -p "$pid" -batch -ex "thread apply all bt" >"$dest/n$n/stacks.txt" 2>&1
		fi
	done
	echo "# the nodes' logs are kept in $dest" >&3
}
