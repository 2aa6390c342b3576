/* A leader killed in the middle of writing an entry leaves it torn on a
 * backup: every byte but the canary landed.  The backup never acks it,
 * never applies it, and does not count it in its log end (what it would
 * tell an election); the next entry of that index overwrites it and is
 * applied whole.  The torn entry is written by the leader's own transport,
 * exactly as its replicate path would have, minus the last eight bytes. */
#include "common/atomic64.h"
#include "coordinator/storage/region_wire.h"
#include "tests/unit/twonode.h"

/* Writes entry IDX at the leader's tail into the backup's log, canary
 * excluded.  Returns its log position. */
static uint64_t tear_entry(struct twonode *c, uint64_t idx, const char *data, uint32_t len)
{
	static _Alignas(64) char buf[8192];
	struct iovec iov = { (void *)data, len };
	struct entry_meta m = { .idx = idx, .view = c->leader->view, .committed = idx,
				.conn = { 0, 1u << 30 }, .type = ENTRY_RECV, .node = 0 };
	uint64_t pos = __atomic_load_n(&c->leader->lead.tail, __ATOMIC_ACQUIRE);
	size_t l = entry_write(buf, &m, &iov, 1, 0, len);

	CHECK(log_pos_marker_fits(c->leader->log_size, pos) &&
	      pos % c->leader->log_size + l <= c->leader->log_size, "test entry would wrap");
	/* Everything the replicate path sends but the canary. */
	CHECK(c->leader->ops->write(c->leader->tp, 1, node_log_off(c->leader, pos) + ENTRY_REPLICATED_OFF,
				    buf + ENTRY_REPLICATED_OFF, l - 8 - ENTRY_REPLICATED_OFF) == 0,
	      "write the torn entry");
	c->leader->ops->ring(c->leader->tp, 1);
	return pos;
}

int main(void)
{
	struct twonode c;
	struct twonode_cmp cmp;
	char data[1000];
	struct iovec iov = { data, sizeof(data) };
	uint64_t lv, li, end, pos, before;

	twonode_start(&c, "256K", "4K");
	memset(data, 'a', sizeof(data));
	for (int i = 0; i < 20; i++)
		CHECK(node_propose(c.leader, ENTRY_RECV, 0, (struct viewstamp){ 0, 1u << 30 }, &iov, 1,
				   sizeof(data), NULL) == 0, "propose %d", i);
	twonode_settle(&c);
	uint64_t last = c.leader->lead.last_idx;

	memset(data, 't', sizeof(data));
	pos = tear_entry(&c, last + 1, data, sizeof(data));
	usleep(300 * 1000);	/* many heartbeats and agree passes */
	CHECK(__atomic_load_n(&c.backup->exec.applied, __ATOMIC_ACQUIRE) == last,
	      "backup applied %llu with a torn entry %llu",
	      (unsigned long long)c.backup->exec.applied, (unsigned long long)last + 1);
	CHECK(load64(&c.leader->ctl->peer[1].acked) == last, "the torn entry was acked");
	uint64_t at = pos;
	CHECK(!node_entry_at(c.backup, &at, last + 1), "the torn entry reads as an entry");
	node_log_end(c.backup, &lv, &li, &end);
	CHECK(li == last && end == pos, "backup's log end %llu at %llu, want %llu at %llu",
	      (unsigned long long)li, (unsigned long long)end, (unsigned long long)last,
	      (unsigned long long)pos);

	/* The real entry of that index lands over it and is applied whole. */
	memset(data, 'r', sizeof(data));
	before = c.leader->lead.tail;
	CHECK(node_propose(c.leader, ENTRY_RECV, 0, (struct viewstamp){ 0, 1u << 30 }, &iov, 1,
			   sizeof(data), NULL) == 0, "propose over the torn entry");
	CHECK(before == pos, "the next entry is not where the torn one was");
	twonode_settle(&c);
	cmp = (struct twonode_cmp){ c.backup, 0 };
	twonode_walk(c.leader, pos, c.leader->lead.tail, twonode_same_on_backup, &cmp);
	at = pos;
	const struct entry_hdr *e = node_entry_at(c.backup, &at, last + 1);
	CHECK(e && ((const char *)entry_data(e))[0] == 'r' &&
	      ((const char *)entry_data(e))[sizeof(data) - 1] == 'r', "backup holds the wrong entry");
	twonode_cleanup(&c);
	return 0;
}
