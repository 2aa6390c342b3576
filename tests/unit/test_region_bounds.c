/* What a peer may write into a region (region_peer_may_write): the log, and
 * of the control page only its own slots and the sync words; never past
 * the end, never the node's own words, never another node's slot. */
#include <stddef.h>

#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "tests/unit/unit.h"

#define SIZE (REGION_CTL_SIZE + (1u << 20))
#define OFF(f) ((uint64_t)offsetof(struct region_ctl, f))

int main(void)
{
	/* The writes the protocol makes. */
	CHECK(region_peer_may_write(2, REGION_CTL_SIZE, 1u << 20, SIZE), "the whole log");
	CHECK(region_peer_may_write(2, SIZE - 8, 8, SIZE), "the log's last word");
	CHECK(region_peer_may_write(2, OFF(lead[2].hb), 16, SIZE), "its lead slot's hb and view");
	CHECK(region_peer_may_write(2, OFF(peer[2].join_end_idx), 8 * 8, SIZE), "its join words");
	CHECK(region_peer_may_write(2, OFF(elect[2]), sizeof(struct elect_req), SIZE), "its request");
	CHECK(region_peer_may_write(2, OFF(vote[2]), sizeof(struct vote_slot), SIZE), "its vote");
	CHECK(region_peer_may_write(2, OFF(probe[2]), sizeof(struct probe_answer), SIZE), "its probe");
	CHECK(region_peer_may_write(0, OFF(sync), sizeof(struct sync_words), SIZE), "sync words");

	/* Past the end, or wrapping around. */
	CHECK(!region_peer_may_write(2, SIZE - 8, 16, SIZE), "past the end");
	CHECK(!region_peer_may_write(2, SIZE + 8, 0, SIZE), "starting past the end");
	CHECK(!region_peer_may_write(2, UINT64_MAX - 7, 16, SIZE), "wrapping offset");
	CHECK(!region_peer_may_write(2, REGION_CTL_SIZE, UINT32_MAX, SIZE), "huge length");

	/* The node's own words, another node's slots, straddling slots. */
	CHECK(!region_peer_may_write(2, 0, 8, SIZE), "the magic");
	CHECK(!region_peer_may_write(2, OFF(dur), 8, SIZE), "the durable view");
	CHECK(!region_peer_may_write(2, REGION_STATUS_OFF + offsetof(struct node_status, role), 4,
				     SIZE),
	      "the status");
	CHECK(!region_peer_may_write(2, OFF(bell), 4, SIZE), "the doorbell");
	CHECK(!region_peer_may_write(2, REGION_MAIL_OFF, 8, SIZE), "the guard's words");
	CHECK(!region_peer_may_write(2, OFF(lead[1]), 8, SIZE), "another node's lead slot");
	CHECK(!region_peer_may_write(2, OFF(vote[0]), 8, SIZE), "another node's vote");
	CHECK(!region_peer_may_write(2, OFF(peer[2].join_view), 16, SIZE), "past its peer slot");
	CHECK(!region_peer_may_write(2, REGION_CTL_SIZE - 8, 16, SIZE), "across the page's end");
	CHECK(!region_peer_may_write(-3, OFF(lead[0]), 8, SIZE), "an unadmitted writer");
	CHECK(!region_peer_may_write(APUS_MAX_NODES, OFF(lead[0]), 8, SIZE), "an id out of range");
	return 0;
}
