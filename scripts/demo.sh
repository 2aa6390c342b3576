#!/usr/bin/env bash
# The main job: a local 3-replica replicated Redis.  Installs what is
# missing, builds, starts the cluster of apps/redis/cluster-shm.conf, runs a
# short workload against the leader, prints `apus status` and every
# replica's DEBUG DIGEST (they must be equal), and stops the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

conf=${APUS_DEMO_CONFIG:-apps/redis/cluster-shm.conf}
apus=build/bin/apus

bash scripts/install-deps.sh
make -s all

# A config whose nodes live in network namespaces (cluster-tcp.conf): make
# them, or run the same cluster on loopback addresses where we cannot.
if grep -qE '^[[:space:]]*netns[[:space:]]*=' "$conf"; then
	if [ "$(id -u)" -eq 0 ] && bash scripts/netns.sh up 3 2>/dev/null; then
		echo "== replicas in network namespaces: $(bash scripts/netns.sh status | tr '\n' ';')"
	else
		echo "== network namespaces unavailable (needs root and ip netns): running on loopback addresses instead"
		loop=$(mktemp /tmp/apus-demo-loopback.XXXXXX.conf)
		bash scripts/netns.sh loopback "$conf" >"$loop"
		conf=$loop
	fi
fi

cleanup() { "$apus" stop --config "$conf" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "== starting 3 replicas of redis-server under libapus.so ($conf)"
"$apus" start --config "$conf"

# Where clients go: the leader's app address, as apus status reports it.
leader_addr=$("$apus" status --config "$conf" --json | tr -d ' \t\r\n' |
	grep -o '{[^{}]*"role":"leader"[^{}]*}' | grep -o '"app_addr":"[^"]*"' | cut -d'"' -f4)
leader_host=${leader_addr%:*}
leader_port=${leader_addr##*:}
sock() { awk -v want="[node $1]" -F= '$0==want{n=1;next} /^\[node/{n=0} n && /data_dir/{gsub(/ /,"",$2); print $2 "/redis.sock"; exit}' "$conf"; }

echo "== workload against the leader ($leader_host:$leader_port)"
bash apps/redis/workload.sh "$leader_port" "$leader_host"

echo "== apus status"
"$apus" status --config "$conf"

echo "== DEBUG DIGEST of every replica (read over each one's local admin socket)"
digests=()
for i in 0 1 2; do
	d=""
	# Backups execute committed entries a moment after the leader answers.
	for _ in $(seq 50); do
		d=$(redis-cli -s "$(sock $i)" DEBUG DIGEST)
		[ "$i" = 0 ] || [ "$d" = "${digests[0]}" ] && break
		sleep 0.1
	done
	keys=$(redis-cli -s "$(sock $i)" DBSIZE)
	echo "node $i: digest $d, $keys keys"
	digests+=("$d")
done
if [ "${digests[0]}" = "${digests[1]}" ] && [ "${digests[0]}" = "${digests[2]}" ]; then
	echo "== all replicas are identical"
else
	echo "== DIGESTS DIFFER" >&2
	exit 1
fi
echo "== stopping"
