# Shared by the servers' recovery benchmarks (apps/*/recovery-bench.sh,
# run together by scripts/restart-bench.sh): timing, the leader's address,
# kill -9 of every server, and the table's rows.  The sourcing script sets
# $apus (the CLI), $conf (its cluster config) and $work (the folder whose
# node* sub-folders are the nodes' data directories).

now_ms() { date +%s%3N; }

# since T0 - seconds (one decimal) since T0 (now_ms).
since() {
	local t=$(($(now_ms) - $1))
	printf '%d.%d' $((t / 1000)) $((t % 1000 / 100))
}

# wait_for CHECK - seconds (one decimal) until the command CHECK succeeds,
# polled every 100 ms; "timeout" after 600 s.
wait_for() {
	local t0
	t0=$(now_ms)
	until "$1"; do
		[ $(($(now_ms) - t0)) -lt 600000 ] || { echo "timeout"; return 0; }
		sleep 0.1
	done
	since "$t0"
}

# status_json - apus status --json of $conf on one line (fails if apus does).
status_json() {
	"$apus" status --config "$conf" --json 2>/dev/null | tr -d ' \t\r\n'
}

# leader_addr - the leader's app address (host:port); fails if none.
leader_addr() {
	local a
	a=$(status_json | grep -o '{[^{}]*"role":"leader"[^{}]*}' |
		grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
	[ -n "$a" ] && echo "$a"
}

# leader_node - the leader's node id; fails if none.
leader_node() {
	local n
	n=$(status_json | grep -o '{[^{}]*"role":"leader"[^{}]*}' |
		grep -o '"id":[0-9]*' | cut -d: -f2)
	[ -n "$n" ] && echo "$n"
}

# all_recoverable - one leader, and every node of three recoverable.
all_recoverable() {
	local j
	j=$(status_json) || return 1
	[ "$(grep -o '"recoverable":true' <<<"$j" | wc -l)" -eq 3 ] &&
		[ "$(grep -o '"role":"leader"' <<<"$j" | wc -l)" -eq 1 ]
}

# kill_all - kill -9 every node's server (the guards bring them back).
kill_all() {
	local d
	for d in "$work"/node*; do
		kill -KILL "$(cat "$d/apus.pid")" 2>/dev/null || true
	done
}

# stop_start - apus stop of all, then apus start; prints how long start took
# (it returns once a leader serves the full state).
stop_start() {
	local t0
	"$apus" stop --config "$conf" >/dev/null 3>&-
	t0=$(now_ms)
	"$apus" start --config "$conf" >/dev/null 3>&-
	since "$t0"
}

# checkpoint_backup N - apus checkpoint of backup N: "DUMP_MS IMAGE_MB"
# (CRIU's dump, the server frozen, and the image's size).
checkpoint_backup() {
	local out
	out=$("$apus" checkpoint --config "$conf" --node "$1" 3>&-) || return 1
	printf '%s %s\n' "$(sed -n 's/.* dump \([0-9]*\) ms$/\1/p' <<<"$out" | tail -n 1)" \
		"$(sed -n 's/.*images \([0-9.]*\) MB.*/\1/p' <<<"$out" | tail -n 1)"
}

# on_fresh_cluster CONF [ckpt] LOADFN - start CONF's cluster, run LOADFN
# HOST PORT against its leader and stop the cluster; with ckpt, a backup is
# checkpointed by CRIU back to back meanwhile.  Prints LOADFN's output.
on_fresh_cluster() {
	local conf=$1 a out loop=""
	shift
	"$apus" start --config "$conf" >/dev/null 3>&-
	a=$(leader_addr)
	if [ "$1" = ckpt ]; then
		shift
		touch "$work/busy"
		(while [ -e "$work/busy" ]; do
			checkpoint_backup $((($(leader_node) + 1) % 3)) >/dev/null 2>&1 || sleep 0.2
		done) &
		loop=$!
	fi
	out=$("$1" "${a%:*}" "${a##*:}")
	[ -n "$out" ] || out=failed
	if [ -n "$loop" ]; then rm -f "$work/busy"; wait "$loop" || true; fi
	"$apus" stop --config "$conf" >/dev/null 3>&-
	echo "$out"
}

# ratio A B - A / B to two decimals, or "-" when either is no number (a
# run that failed: a failover mid-run ends redis-benchmark).
ratio() {
	[[ "$1" =~ ^[0-9.]+$ && "$2" =~ ^[0-9.]*[1-9][0-9.]*$ ]] || { echo -; return; }
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}

row() { printf '| %s | %s |\n' "$1" "$2"; }
table_head() { printf '| what | seconds |\n|---|---|\n'; }
