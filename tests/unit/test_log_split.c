/* Large events are split into entries of at most max_entry bytes, in order,
 * whose data put together is the event. */
#include "tests/unit/twonode.h"

struct gather {
	char *out;
	size_t len;
	int entries;
	uint32_t max;
};

static void collect(struct node *leader, uint64_t pos, const struct entry_hdr *e, void *arg)
{
	struct gather *g = arg;

	CHECK(e->type == ENTRY_RECV, "type %d", e->type);
	CHECK(e->data_sz <= g->max, "entry of %u bytes exceeds max_entry %u", e->data_sz, g->max);
	CHECK(e->conn_idx == 77, "connection id lost in a split");
	memcpy(g->out + g->len, entry_data(e), e->data_sz);
	g->len += e->data_sz;
	g->entries++;
}

int main(void)
{
	struct twonode c;
	static char big[300000], back[300000];
	struct iovec iov[2] = { { big, 123457 }, { big + 123457, sizeof(big) - 123457 } };

	twonode_start(&c, "1M", "16K");
	srand(5);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)rand();
	uint64_t before = c.leader->lead.tail, first = c.leader->lead.last_idx + 1;
	CHECK(node_propose(c.leader, ENTRY_RECV, 0, (struct viewstamp){ 0, 77 }, iov, 2, sizeof(big), NULL) == 0,
	      "propose");
	struct gather g = { back, 0, 0, 16 << 10 };
	/* Read the backup's copy: it must hold the same split. */
	twonode_walk(c.backup, before, c.leader->lead.tail, collect, &g);
	CHECK(g.entries == (int)((sizeof(big) + (16 << 10) - 1) / (16 << 10)), "%d entries", g.entries);
	CHECK(g.len == sizeof(big) && !memcmp(back, big, sizeof(big)), "data differs after the split");
	CHECK(c.leader->lead.last_idx == first + (uint64_t)g.entries - 1,
	      "indexes not consecutive");
	twonode_settle(&c);
	twonode_cleanup(&c);
	return 0;
}
