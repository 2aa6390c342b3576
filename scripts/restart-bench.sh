#!/usr/bin/env bash
# Whole-cluster restarts after the log wrapped, for every shipped server,
# side by side in one run (BENCHMARKS.md, issue 28): each server's
# recovery benchmark in turn, as shipped (guard on, its recovery points):
#
#   apps/redis/recovery-bench.sh      1,000,000 keys of 100 B, a 16 MB log
#   apps/memcached/recovery-bench.sh  100,000 sets of 16 kB (1 GB of items), 256 MB log
#   apps/mariadb/recovery-bench.sh    100,000 rows of 1 kB, a 16 MB log
#
# Each prints its server's own cold start next to the time until an apus
# leader serves the full state again after kill -9 of all and after apus
# stop + apus start, and the leader's throughput while recovery points are
# taken as a ratio to without.
#
#   scripts/restart-bench.sh [--small] [SERVER ...]
#     SERVER  redis, memcached, mariadb (default: all three)
#     --small a tenth of each size (a quick check of the scripts)
set -euo pipefail
cd "$(dirname "$0")/.."

small=""
servers=()
for a in "$@"; do
	case $a in
	-h | --help) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	--small) small=1 ;;
	redis | memcached | mariadb) servers+=("$a") ;;
	*) echo "restart-bench: unknown argument '$a' (--help)" >&2; exit 2 ;;
	esac
done
[ ${#servers[@]} -gt 0 ] || servers=(redis memcached mariadb)

for s in "${servers[@]}"; do
	case $s$small in
	redis) args=(1000000 100 16M) ;;
	redis1) args=(100000 100 4M) ;;
	memcached) args=(100000 16384 256M) ;;
	memcached1) args=(10000 16384 32M) ;;
	mariadb) args=(100000 1000 16M) ;;
	mariadb1) args=(10000 1000 4M) ;;
	esac
	echo "## $s: apps/$s/recovery-bench.sh ${args[*]}"
	echo
	"apps/$s/recovery-bench.sh" "${args[@]}"
	echo
done
