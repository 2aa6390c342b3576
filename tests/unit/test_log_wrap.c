/* Wrap-around: thousands of entries of random sizes through a 64 KiB log
 * (many laps).  Every entry sits at the same offset, byte for byte, in the
 * leader's log and the backup's, and the backup applies all of them; over
 * the shm backend and over the tcp backend (loopback). */
#include "tests/unit/twonode.h"

static void run(const char *transport)
{
	struct twonode c;

	twonode_start_with(&c, "64K", "4K", "none", transport);
	srand(3);
	twonode_wrap(&c, 3000);
	twonode_cleanup(&c);
}

int main(void)
{
	run("shm");
	run("tcp");
	return 0;
}
