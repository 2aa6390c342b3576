/* Arbitrary bytes as a checkpoint's meta file, read by ckpt_meta_read
 * as `apus checkpoint list` and restore do.  Invariants: accepted only
 * with a positive pid; fields absent from the file keep their value; and
 * what ckpt_meta_write writes is read back unchanged. */
#include <stdint.h>
#include <string.h>

#include "guard/checkpoint.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ckpt_info c, back;
	const char *dir = fuzz_tmpdir();

	memset(&c, 0, sizeof(c));
	snprintf(c.dir, sizeof(c.dir), "%s", dir);
	c.index = 0x1111;
	fuzz_file("meta", data, size, 0644);
	if (ckpt_meta_read(&c) == 0)
		FUZZ_CHECK(c.pid > 0);
	if (!memmem(data, size, "index", 5))
		FUZZ_CHECK(c.index == 0x1111);

	/* Whatever was read, written and read again is the same. */
	if (c.pid <= 0)
		c.pid = 1;
	FUZZ_CHECK(!ckpt_meta_write(&c, dir));
	memset(&back, 0, sizeof(back));
	snprintf(back.dir, sizeof(back.dir), "%s", dir);
	FUZZ_CHECK(!ckpt_meta_read(&back));
	FUZZ_CHECK(back.index == c.index && back.view == c.view && back.log_pos == c.log_pos &&
		   back.time_ms == c.time_ms && back.pid == c.pid &&
		   back.image_bytes == c.image_bytes && back.data_bytes == c.data_bytes &&
		   back.dump_ms == c.dump_ms);
	return 0;
}
