#include "checks.h"

#include <errno.h>

/* Plain loads and stores of one word of a shared entry: each word is
 * atomic, the entry as a whole is guarded by its seq. */
#define PUT(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define GET(p) __atomic_load_n((p), __ATOMIC_RELAXED)

void checks_record(struct node_status *s, uint64_t conn_view, uint64_t conn_idx,
		   const struct out_check *c, int complete)
{
	uint64_t at, crc, seq = GET(&s->checks) + 1;
	enum out_verdict v = out_check_verdict(c, complete, &at, &crc);
	struct check_result *e = &s->check[(seq - 1) % CHECKS_KEEP];

	if (v == OUT_NONE)
		return;
	PUT(&e->seq, 0);
	/* Pairs with the acquire fence of checks_read: a reader that copied
	 * any of the words below sees seq no longer what it was. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	PUT(&e->conn_view, conn_view);
	PUT(&e->conn_idx, conn_idx);
	PUT(&e->leader_off, c->final_off);
	PUT(&e->leader_crc, c->final_crc);
	PUT(&e->at, at);
	PUT(&e->replica_crc, crc);
	PUT(&e->verdict, (uint32_t)v);
	/* Pairs with the acquire load of seq in checks_read: the words
	 * above are in place before the entry counts. */
	__atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
	/* Pairs with checks_count: the entry is whole before it is counted. */
	__atomic_store_n(&s->checks, seq, __ATOMIC_RELEASE);
}

uint64_t checks_count(const struct node_status *s)
{
	return __atomic_load_n(&s->checks, __ATOMIC_ACQUIRE);
}

int checks_read(const struct node_status *s, uint64_t seq, struct check_result *out)
{
	const struct check_result *e;

	if (!seq)
		return -ENOENT;
	e = &s->check[(seq - 1) % CHECKS_KEEP];
	/* Pairs with the release store of seq in checks_record. */
	if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != seq)
		return !GET(&e->seq) && seq <= checks_count(s) ? -EAGAIN : -ENOENT;
	out->seq = seq;
	out->conn_view = GET(&e->conn_view);
	out->conn_idx = GET(&e->conn_idx);
	out->leader_off = GET(&e->leader_off);
	out->leader_crc = GET(&e->leader_crc);
	out->at = GET(&e->at);
	out->replica_crc = GET(&e->replica_crc);
	out->verdict = GET(&e->verdict);
	out->pad = 0;
	/* Pairs with the release fence of checks_record: if a writer began
	 * on this entry before our copies, seq has moved by now. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return GET(&e->seq) == seq ? 0 : -EAGAIN;
}
