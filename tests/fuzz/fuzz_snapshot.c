/* The guard's snapshot protocol (snapshot_wire.c) on arbitrary bytes; the
 * first byte picks what the rest is:
 *   even  a client's hello to the guard of node SELF of NNODES (the next
 *         byte): accepted only with the magic, version 1, and a node that
 *         is configured and not SELF, which is the node returned;
 *   odd   the guard's reply to a client with a reason buffer of CAP bytes
 *         (the next byte): the reason length given back is below CAP
 *         whatever the peer claims, and a refusal is any nonzero status. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "guard/snapshot_wire.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	if (!(data[0] & 1)) {
		int self = data[1] & 7, nnodes = 1 + (data[1] >> 3 & 7);
		uint32_t node = UINT32_MAX, want, version;
		int rc = snapnet_hello_check(data + 2, size - 2, self, nnodes, &node);

		FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -EPERM);
		if (rc) {
			FUZZ_CHECK(node == UINT32_MAX);
			return 0;
		}
		FUZZ_CHECK(size - 2 == SNAPNET_HELLO_LEN);
		memcpy(&version, data + 2 + 8, 4);
		memcpy(&want, data + 2 + 12, 4);
		FUZZ_CHECK(!memcmp(data + 2, "APUSSNAP", 8) && version == 1);
		FUZZ_CHECK(node == want && node < (uint32_t)nnodes && node != (uint32_t)self);
		return 0;
	}
	size_t cap = data[1], why = SIZE_MAX;
	struct snap_meta m;
	uint32_t status;
	int rc = snapnet_reply_parse(data + 2, size - 2, cap, &m, &why);

	if (size - 2 != SNAPNET_REPLY_LEN || !cap) {
		FUZZ_CHECK(rc == -EINVAL);
		return 0;
	}
	memcpy(&status, data + 2, 4);
	FUZZ_CHECK(rc == (status != 0));
	FUZZ_CHECK(why < cap);
	FUZZ_CHECK(!memcmp(&m, data + 2 + 8, sizeof(m)));
	return 0;
}
