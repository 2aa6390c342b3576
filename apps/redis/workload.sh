#!/usr/bin/env bash
# A short, deterministic Redis workload against PORT [HOST] (default
# 127.0.0.1): a few hand-made commands, then redis-benchmark's write mix.
set -euo pipefail
port=${1:?usage: workload.sh PORT [HOST]}
host=${2:-127.0.0.1}

redis-cli -h "$host" -p "$port" SET greeting "hello from apus" >/dev/null
redis-cli -h "$host" -p "$port" RPUSH fruits apple banana cherry >/dev/null
redis-cli -h "$host" -p "$port" HSET user:1 name ada lang c >/dev/null
redis-cli -h "$host" -p "$port" INCRBY counter 41 >/dev/null
redis-cli -h "$host" -p "$port" INCR counter >/dev/null
echo "GET greeting -> $(redis-cli -h "$host" -p "$port" GET greeting)"
echo "GET counter  -> $(redis-cli -h "$host" -p "$port" GET counter)"
redis-benchmark -h "$host" -p "$port" -t set,incr,lpush,sadd,hset -n 20000 -c 20 -r 10000 -q 2>&1 |
	tr '\r' '\n' | grep -E 'requests per second' || true
