/* Entry encode/decode: fields and data survive, the canary depends on the
 * viewstamp, and a stale or damaged entry is never accepted. */
#include <string.h>

#include "coordinator/storage/entry.h"
#include "tests/unit/unit.h"

static _Alignas(64) char log_buf[1 << 16];

int main(void)
{
	char data[1000];
	struct iovec iov[3] = { { data, 10 }, { data + 10, 490 }, { data + 500, 500 } };
	struct entry_meta m = { .idx = 42, .view = 3, .committed = 40, .conn = { 3, 7 },
				.type = ENTRY_RECV, .node = 1 };

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7 + 1);
	size_t len = entry_write(log_buf, &m, iov, 3, 0, sizeof(data));
	const struct entry_hdr *e = (const void *)log_buf;

	CHECK(len == entry_canary_off(sizeof(data)) + 8, "length %zu", len);
	CHECK(entry_size(sizeof(data)) % ENTRY_ALIGN == 0, "unaligned size");
	CHECK(entry_check(log_buf, 42, sizeof(log_buf)), "a whole entry is rejected");
	CHECK(e->idx == 42 && e->view == 3 && e->committed == 40 && e->conn_view == 3 &&
		      e->conn_idx == 7 && e->type == ENTRY_RECV && e->node == 1 &&
		      e->data_sz == sizeof(data),
	      "header fields changed");
	CHECK(!memcmp(entry_data(e), data, sizeof(data)), "data changed");
	CHECK(!entry_check(log_buf, 41, sizeof(log_buf)), "accepted under another index");
	CHECK(!entry_check(log_buf, 42, len - 1), "accepted beyond its room");
	CHECK(entry_canary(3, 42) != entry_canary(4, 42) && entry_canary(3, 42) != entry_canary(3, 43),
	      "canary ignores the viewstamp");

	/* Skip/len gather the middle of a scattered buffer (a split entry). */
	entry_write(log_buf + 4096, &m, iov, 3, 5, 600);
	CHECK(!memcmp(entry_data((const void *)(log_buf + 4096)), data + 5, 600), "gather from offset");

	/* A flipped data bit or a header from another view is caught. */
	log_buf[sizeof(struct entry_hdr) + 100] ^= 4;
	CHECK(!entry_check(log_buf, 42, sizeof(log_buf)), "flipped data bit accepted");
	log_buf[sizeof(struct entry_hdr) + 100] ^= 4;
	CHECK(entry_check(log_buf, 42, sizeof(log_buf)), "restored entry rejected");
	((struct entry_hdr *)log_buf)->view = 4;
	CHECK(!entry_check(log_buf, 42, sizeof(log_buf)), "entry with another view accepted");

	/* Reply slots are outside the replicated part: acks do not break the CRC. */
	((struct entry_hdr *)log_buf)->view = 3;
	((struct entry_hdr *)log_buf)->reply[2] = 42;
	CHECK(entry_check(log_buf, 42, sizeof(log_buf)), "an ack in a reply slot broke the entry");
	return 0;
}
