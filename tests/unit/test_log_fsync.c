/* fsync = always: the path that writes each entry to the log's durable
 * copy (apus.wal, wal.h) before it is acked runs on leader and backup, and
 * the copies, read back through a file descriptor, hold every entry of the
 * log.  (That the bytes reached the platter needs a power cut to prove;
 * not here.) */
#include <fcntl.h>

#include "coordinator/storage/region_wire.h"
#include "tests/unit/twonode.h"

static void same_in_file(struct node *n, uint64_t pos, const struct entry_hdr *e, void *arg)
{
	int fd = *(int *)arg;
	size_t off = pos % n->log_size, len = entry_canary_off(e->data_sz) + 8;
	static char buf[1 << 16];

	CHECK(pread(fd, buf, len, (off_t)(REGION_CTL_SIZE + off)) == (ssize_t)len, "pread");
	CHECK(!memcmp(buf + ENTRY_REPLICATED_OFF, (const char *)e + ENTRY_REPLICATED_OFF,
		      len - ENTRY_REPLICATED_OFF), "entry %llu differs in the file",
	      (unsigned long long)e->idx);
}

int main(void)
{
	struct twonode c;
	char data[900], path[128];
	struct iovec iov = { data, sizeof(data) };

	twonode_start_fsync(&c, "256K", "4K", "always");
	CHECK(c.leader->cfg.fsync == FSYNC_ALWAYS, "policy not parsed");
	memset(data, 'z', sizeof(data));
	for (int i = 0; i < 200; i++)
		CHECK(node_propose(c.leader, ENTRY_RECV, 0, (struct viewstamp){ 0, 1u << 30 }, &iov, 1,
				   sizeof(data), NULL) == 0, "propose %d", i);
	twonode_settle(&c);
	for (int node = 0; node < 2; node++) {
		snprintf(path, sizeof(path), "%s/n%d/apus.wal", c.dir, node);
		int fd = open(path, O_RDONLY);
		CHECK(fd >= 0, "open %s", path);
		twonode_walk(node ? c.backup : c.leader, 0, c.leader->lead.tail, same_in_file, &fd);
		close(fd);
	}
	twonode_cleanup(&c);
	return 0;
}
