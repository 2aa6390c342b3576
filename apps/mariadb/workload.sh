#!/usr/bin/env bash
# sysbench oltp_read_write against the leader at PORT [HOST] (default
# 127.0.0.1): prepare (2 tables of 1,000 rows in database sbtest, user
# sbtest with an empty password: apps/mariadb/init.sh), then a short run.
#
#   workload.sh PORT [HOST]
#
# Environment: THREADS (default 1), TIME (seconds, default 20), TABLES (2),
# TABLE_SIZE (1000), PREPARE (1: drop nothing, create the tables; 0: skip).
# THREADS > 1 is what the README's "What does not work" is about: backups
# of a thread-per-connection server replay concurrent transactions in an
# order that may differ from the leader's.
set -euo pipefail
port=${1:?usage: workload.sh PORT [HOST]}
host=${2:-127.0.0.1}
command -v sysbench >/dev/null || { echo "workload.sh: sysbench not found (apt-get install sysbench)" >&2; exit 1; }
sb=(sysbench oltp_read_write --mysql-host="$host" --mysql-port="$port" --mysql-user=sbtest
	--mysql-password= --mysql-db=sbtest --tables="${TABLES:-2}" --table-size="${TABLE_SIZE:-1000}")
if [ "${PREPARE:-1}" = 1 ]; then
	"${sb[@]}" prepare
fi
"${sb[@]}" --threads="${THREADS:-1}" --time="${TIME:-20}" run
