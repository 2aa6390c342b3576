/* Wrap-around: thousands of entries of random sizes through a 64 KiB log
 * (many laps).  Every entry sits at the same offset, byte for byte, in the
 * leader's log and the backup's, and the backup applies all of them; over
 * the shm backend and over the tcp backend (loopback). */
#include "tests/unit/twonode.h"


static void run(const char *transport)
{
	struct twonode c;
	static char buf[6000];
	uint64_t proposed = 0;

	twonode_compared = 0;
	twonode_start_with(&c, "64K", "4K", "none", transport);
	srand(3);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)rand();
	for (int i = 0; i < 3000; i++) {
		size_t len = (size_t)rand() % 3000 + 1;
		struct iovec iov = { buf + rand() % 1000, len };
		uint64_t before = c.leader->tail;

		CHECK(node_propose(c.leader, ENTRY_RECV, (struct viewstamp){ 0, 1u << 30 }, &iov, 1, len,
				   NULL) == 0, "propose %d", i);
		twonode_walk(c.leader, before, c.leader->tail, twonode_same_on_backup, c.backup);
		proposed++;
	}
	CHECK(c.leader->tail > 20 * c.leader->log_size, "only %llu bytes: the log did not wrap enough",
	      (unsigned long long)c.leader->tail);
	CHECK(twonode_compared == (int)proposed, "compared %d of %llu", twonode_compared,
	      (unsigned long long)proposed);
	twonode_settle(&c);
	twonode_cleanup(&c);
}

int main(void)
{
	run("shm");
	run("tcp");
	return 0;
}
