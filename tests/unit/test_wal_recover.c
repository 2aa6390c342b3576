/* fsync = batch with the region in memory (region_dir): within a few sync
 * passes the durable copy (apus.wal) holds every entry of both nodes'
 * logs, and when the memory file is gone (a reboot) a new region is
 * rebuilt from the copy: same log, same durable words. */
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>

#include "coordinator/storage/region.h"
#include "coordinator/storage/region_wire.h"
#include "tests/unit/twonode.h"

static void same_in_region(struct node *n, uint64_t pos, const struct entry_hdr *e, void *arg)
{
	const char *log = (const char *)arg + REGION_CTL_SIZE;
	size_t off = pos % n->log_size, len = entry_canary_off(e->data_sz) + 8;

	CHECK(!memcmp(log + off + ENTRY_REPLICATED_OFF, (const char *)e + ENTRY_REPLICATED_OFF,
		      len - ENTRY_REPLICATED_OFF), "entry %llu differs in the rebuilt region",
	      (unsigned long long)e->idx);
}

int main(void)
{
	struct twonode c;
	struct statfs fs;
	struct region_origin origin;
	char data[3000], mem[PATH_MAX];
	struct iovec iov = { data, sizeof(data) };
	void *base;
	int fd;

	if (statfs("/dev/shm", &fs) < 0 || fs.f_type != TMPFS_MAGIC) {
		printf("skipped: /dev/shm is not a tmpfs here\n");
		return 77;
	}
	twonode_start_fsync(&c, "256K", "4K", "batch");
	for (int i = 0; i < 300; i++) {	/* 900 KB: over three laps of the log */
		memset(data, 'a' + i % 26, sizeof(data));
		CHECK(node_propose(c.leader, ENTRY_RECV, 0, (struct viewstamp){ 0, 1u << 30 }, &iov, 1,
				   sizeof(data), NULL) == 0, "propose %d", i);
	}
	twonode_settle(&c);
	for (int node = 0; node < 2; node++) {
		struct node *n = node ? c.backup : c.leader;

		CHECK(region_backing_path(&n->cfg, node, mem) == 0, "backing path of node %d", node);
		CHECK(!strncmp(mem, "/dev/shm/", 9), "node %d's region is in %s, not /dev/shm", node,
		      mem);
		CHECK(n->wal.fd >= 0, "node %d keeps no durable copy", node);
	}
	/* Three passes of 50 ms: everything held is in the copy. */
	usleep(200 * 1000);
	for (int node = 0; node < 2; node++) {
		struct node *n = node ? c.backup : c.leader;
		/* The reboot: the memory file is gone, the copy is what is left. */
		CHECK(region_backing_path(&n->cfg, node, mem) == 0, "backing path");
		CHECK(unlink(mem) == 0, "unlink %s", mem);
		CHECK(region_create(&n->cfg, node, &base, &fd, &origin) == 0, "rebuild node %d", node);
		CHECK(origin.recovered && origin.from_wal,
		      "node %d: not recovered from its copy (recovered %d, from_wal %d)", node,
		      origin.recovered, origin.from_wal);
		CHECK(!memcmp(&((struct region_ctl *)base)->dur, &n->ctl->dur, sizeof(n->ctl->dur)),
		      "node %d: durable words differ", node);
		/* Every entry of the log's current lap is in it. */
		uint64_t tail = c.leader->lead.tail;
		CHECK(tail > n->log_size, "the log never wrapped");
		twonode_walk(n, tail - tail % n->log_size, tail, same_in_region, base);
		munmap(base, region_size_for(n->log_size));
		close(fd);
	}
	twonode_cleanup(&c);
	return 0;
}
