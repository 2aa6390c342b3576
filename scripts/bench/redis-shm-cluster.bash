# Sourced by the benchmarks that need one 3-replica Redis cluster of their
# own (held-writes.sh, idle-syscalls.sh): apps/redis/cluster-shm.conf in a
# temporary folder, guard off, no snapshot_cmd, its ports moved so that
# it runs beside the shipped one.

# redis_shm_cluster BIN NAME APP METRICS - writes the config to $conf in a
# fresh $work (/tmp/apus-NAME-*), node i's app port APP<i> and metrics port
# METRICS<i> (i = 1..3, e.g. APP 739: 7391-7393), and has the cluster
# stopped and $work removed when the script exits.  Start it yourself.
redis_shm_cluster() {
	cluster_bin=$1
	work=$(mktemp -d "/tmp/apus-$2-XXXXXX")
	conf=$work/c.conf
	trap redis_shm_cluster_cleanup EXIT
	sed -e "s#/tmp/apus-demo#$work#" -e "s/= 700\([123]\)/= $3\1/; s/= 701\([123]\)/= $4\1/" \
		-e "s/^guard .*/guard = off/; /^snapshot_/d" -e "s#{config_dir}#$PWD/apps/redis#g" \
		apps/redis/cluster-shm.conf >"$conf"
}

redis_shm_cluster_cleanup() {
	"$cluster_bin" stop --config "$conf" >/dev/null 2>&1
	bash scripts/drop-regions.sh "$work" 2>/dev/null
	rm -rf "$work"
}
