# Sourced by the benchmark scripts.  cpu_ticks PID... - utime + stime (all
# threads, in clock ticks) of the processes PID, those already gone left out.
cpu_ticks() {
	local p t=0 f
	for p in "$@"; do
		f=$(cut -d')' -f2- "/proc/$p/stat" 2>/dev/null) || continue
		# Fields after "comm)": state is 1st, utime 12th, stime 13th.
		t=$((t + $(awk '{print $12 + $13}' <<<"$f")))
	done
	echo "$t"
}
