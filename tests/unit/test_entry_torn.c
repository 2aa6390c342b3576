/* A reader never accepts an entry written byte by byte (in order, and in
 * random order with the canary last) until its last byte is in place, even
 * over the previous pass's bytes of the same slot. */
#include <string.h>

#include "coordinator/storage/entry.h"
#include "tests/unit/unit.h"

static _Alignas(64) char old_pass[8192], target[8192], slot[8192];

int main(void)
{
	char data[700];
	struct iovec iov = { data, sizeof(data) };
	struct entry_meta old = { .idx = 10, .view = 1, .type = ENTRY_RECV, .conn = { 1, 2 } };
	struct entry_meta now = { .idx = 90, .view = 2, .type = ENTRY_RECV, .conn = { 1, 2 } };

	srand(11);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)rand();
	/* The previous pass left a whole, valid entry in the slot. */
	entry_write(old_pass, &old, &iov, 1, 0, sizeof(data));
	size_t len = entry_write(target, &now, &iov, 1, 0, sizeof(data));
	size_t from = ENTRY_REPLICATED_OFF;	/* what a leader sends */

	for (int round = 0; round < 50; round++) {
		size_t order[8192], n = 0;

		memcpy(slot, old_pass, sizeof(slot));
		for (size_t i = from; i < len - 8; i++)
			order[n++] = i;
		if (round) {	/* shuffle the body; the canary stays last */
			for (size_t i = n - 1; i > 0; i--) {
				size_t j = (size_t)rand() % (i + 1), t = order[i];
				order[i] = order[j];
				order[j] = t;
			}
		}
		for (size_t i = len - 8; i < len; i++)
			order[n++] = i;
		for (size_t k = 0; k < n; k++) {
			slot[order[k]] = target[order[k]];
			int ok = entry_check(slot, 90, sizeof(slot));
			int complete = !memcmp(slot + from, target + from, len - from);
			CHECK(ok == complete, "round %d: accepted=%d with %zu of %zu bytes in place", round,
			      ok, k + 1, n);
		}
		CHECK(entry_check(slot, 90, sizeof(slot)), "round %d: whole entry rejected", round);
	}
	return 0;
}
