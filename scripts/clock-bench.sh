#!/usr/bin/env bash
# What the clock as an input costs a server (BENCHMARKS.md, issue 32):
#
#   scripts/clock-bench.sh [N] [ROUNDS]
#
# Every clock read of a server under apus goes through preload/clock.c:
# ns per call of clock_gettime (REALTIME, MONOTONIC), gettimeofday and
# time, bare and with LD_PRELOAD=libapus.so (outside a replica the shim
# passes through: this is the wrappers' own cost, outside a window), in
# alternating runs, best of ROUNDS (5) rounds of N (20,000,000) calls.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
make -s all build/bench/clockcost >/dev/null
for run in 1 2; do
	echo "bare (run $run):"
	build/bench/clockcost "$@"
	echo "LD_PRELOAD=build/lib/libapus.so (run $run):"
	env -u APUS_CONFIG -u APUS_NODE LD_PRELOAD="$PWD/build/lib/libapus.so" build/bench/clockcost "$@"
done
