#include "coordinator/storage/checks.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"

#include <errno.h>

/* Stores and loads of one word of a shared entry; the entry as a whole
 * is guarded by its seq.  Each word of an entry is stored with release
 * semantics after its seq was cleared, and loaded with acquire semantics
 * before its seq is read again: a reader that copied a word of a newer
 * write therefore sees the cleared (or a newer) seq, and refuses the copy.
 * (No fences: ThreadSanitizer does not model them.)  On x86 every one is
 * a plain move. */
#define PUT(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define GET(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)

/* Writes check SEQ into E (and Q, the question it answers, into *ANSWERED). */
static void put_entry(struct check_result *e, uint64_t seq, const struct check_result *r,
		      uint64_t *answered, uint64_t q)
{
	/* Cleared first: each PUT below pairs with a GET of get_entry, after
	 * which that reader's last load of seq sees this 0 or later. */
	__atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
	if (answered)
		PUT(answered, q);
	PUT(&e->conn_view, r->conn_view);
	PUT(&e->conn_idx, r->conn_idx);
	PUT(&e->leader_off, r->leader_off);
	PUT(&e->leader_crc, r->leader_crc);
	PUT(&e->at, r->at);
	PUT(&e->replica_crc, r->replica_crc);
	PUT(&e->verdict, r->verdict);
	/* Pairs with the acquire load of seq in get_entry: the words above
	 * are in place before the entry counts. */
	__atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
}

/* Copies E into *OUT if it holds check SEQ (0: whichever it holds) and
 * stays so while copied, with *ANSWERED into *Q.  0, -ENOENT or -EAGAIN
 * (being written). */
static int get_entry(const struct check_result *e, uint64_t seq, struct check_result *out,
		     const uint64_t *answered, uint64_t *q)
{
	/* Pairs with the release store of seq in put_entry. */
	uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);

	if (!s)
		return -EAGAIN;
	if (seq && s != seq)
		return -ENOENT;
	out->seq = s;
	out->conn_view = GET(&e->conn_view);
	out->conn_idx = GET(&e->conn_idx);
	out->leader_off = GET(&e->leader_off);
	out->leader_crc = GET(&e->leader_crc);
	out->at = GET(&e->at);
	out->replica_crc = GET(&e->replica_crc);
	out->verdict = GET(&e->verdict);
	out->pad = 0;
	if (answered)
		*q = GET(answered);
	/* After the acquire loads: if any of them saw a newer write, seq has
	 * moved by now. */
	return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s ? 0 : -EAGAIN;
}

void checks_record(struct region_ctl *ctl, uint64_t conn_view, uint64_t conn_idx,
		   const struct out_check *c, int complete)
{
	struct node_status *s = region_status(ctl);
	struct verify_words *v = &region_mail(ctl)->verify;
	struct check_result r = { .conn_view = conn_view, .conn_idx = conn_idx,
				  .leader_off = c->final_off, .leader_crc = c->final_crc };
	uint64_t seq = GET(&s->checks) + 1, q;

	r.verdict = out_check_verdict(c, complete, &r.at, &r.replica_crc);
	if (r.verdict == OUT_NONE)
		return;
	put_entry(&s->check[(seq - 1) % CHECKS_KEEP], seq, &r, NULL, 0);
	/* Pairs with checks_count: the entry is whole before it is counted. */
	__atomic_store_n(&s->checks, seq, __ATOMIC_RELEASE);
	/* Pairs with the release store of want_seq in checks_ask.  A mark
	 * read across a new question is caught by the asker, who compares
	 * the answer's mark with its own. */
	q = __atomic_load_n(&v->want_seq, __ATOMIC_ACQUIRE);
	if (q && GET(&v->want_off) == r.leader_off && GET(&v->want_crc) == r.leader_crc)
		put_entry(&v->answer, seq, &r, &v->answered, q);
}

uint64_t checks_count(const struct node_status *s)
{
	return __atomic_load_n(&s->checks, __ATOMIC_ACQUIRE);
}

int checks_read(const struct node_status *s, uint64_t seq, struct check_result *out)
{
	int rc;

	if (!seq || seq > checks_count(s))
		return -ENOENT;
	/* -EAGAIN: a newer check is being written over it (SEQ itself is
	 * counted only once whole). */
	rc = get_entry(&s->check[(seq - 1) % CHECKS_KEEP], seq, out, NULL, NULL);
	return rc;
}

void checks_ask(struct region_ctl *ctl, uint64_t q, uint64_t off, uint64_t crc)
{
	struct verify_words *v = &region_mail(ctl)->verify;

	PUT(&v->want_seq, 0);
	PUT(&v->want_off, off);
	PUT(&v->want_crc, crc);
	/* Pairs with the acquire load of want_seq in checks_record. */
	__atomic_store_n(&v->want_seq, q, __ATOMIC_RELEASE);
}

void checks_unask(struct region_ctl *ctl, uint64_t q)
{
	struct verify_words *v = &region_mail(ctl)->verify;

	__atomic_compare_exchange_n(&v->want_seq, &q, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

int checks_answer(const struct region_ctl *ctl, uint64_t q, uint64_t off, uint64_t crc,
		  struct check_result *out)
{
	const struct verify_words *v = &region_mail(ctl)->verify;
	uint64_t answered;
	int rc;

	if (!GET(&v->answer.seq))
		return -ENOENT;	/* never answered */
	rc = get_entry(&v->answer, 0, out, &v->answered, &answered);
	if (rc)
		return rc;
	return answered == q && out->leader_off == off && out->leader_crc == crc ? 0 : -ENOENT;
}
