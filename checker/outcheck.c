#include "checker/outcheck.h"

#include <string.h>

#include "checker/crc64.h"

void out_check_init(struct out_check *c, diverge_fn fn, void *arg)
{
	memset(c, 0, sizeof(*c));
	c->fn = fn;
	c->arg = arg;
}

/* Reports the first difference; END bytes of the window end at OFF (0: the
 * window no longer holds the bytes before OFF). */
static void diverge(struct out_check *c, uint64_t off, uint64_t theirs, uint64_t mine,
		    uint64_t index, const char *why, size_t end)
{
	size_t n = end < 64 ? end : 64;

	if (c->diverged)
		return;
	c->diverged = 1;
	c->differs = 1;
	c->diff_off = off;
	c->diff_crc = mine;
	c->fn(c->arg, off, theirs, mine, index, why, c->win + end - n, n);
}

static void on_fold(void *arg, uint64_t off, uint64_t crc)
{
	struct out_check *c = arg;
	unsigned k = c->nmine++ % OUT_KEEP;

	c->mine[k].off = off;
	c->mine[k].crc = crc;
	c->bound_crc = crc;
	while (c->th_head != c->th_tail && c->theirs[c->th_head % OUT_KEEP].off <= off) {
		unsigned h = c->th_head++ % OUT_KEEP;
		if (c->theirs[h].off == off && crc != c->theirs[h].crc)
			diverge(c, off, c->theirs[h].crc, crc, c->theirs[h].index, "hash", OUT_FOLD);
	}
}

void out_check_absorb(struct out_check *c, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		size_t at = (size_t)(c->out.off % OUT_FOLD), n = OUT_FOLD - at;

		if (n > len)
			n = len;
		memcpy(c->win + at, p, n);
		out_hash_feed(&c->out, p, n, on_fold, c);
		p += n;
		len -= n;
	}
}

void out_check_leader(struct out_check *c, uint64_t off, uint64_t crc, uint64_t index)
{
	if (off <= c->out.off) {
		for (unsigned i = 0; i < OUT_KEEP && i < c->nmine; i++)
			if (c->mine[i].off == off && c->mine[i].crc != crc)
				diverge(c, off, crc, c->mine[i].crc, index, "hash",
					off == c->out.off ? OUT_FOLD : 0);
		return;	/* matched, or too old to compare */
	}
	unsigned k = c->th_tail - c->th_head < OUT_KEEP ? c->th_tail++ % OUT_KEEP
							 : (c->th_tail - 1) % OUT_KEEP;
	c->theirs[k].off = off;
	c->theirs[k].crc = crc;
	c->theirs[k].index = index;
}

void out_check_leader_final(struct out_check *c, uint64_t off, uint64_t crc, uint64_t index)
{
	c->have_final = 1;
	c->final_off = off;
	c->final_crc = crc;
	c->final_index = index;
}

void out_check_finish(struct out_check *c)
{
	uint64_t base = c->out.off - c->out.off % OUT_FOLD, mine;

	if (!c->have_final)
		return;
	if (c->final_off > c->out.off) {
		diverge(c, c->out.off, c->final_crc, c->out.crc, c->final_index, "length",
			(size_t)(c->out.off - base));
		return;
	}
	if (c->final_off < base)
		return;	/* the leader's client left early; we read on past it */
	mine = crc64(c->bound_crc, c->win, (size_t)(c->final_off - base));
	if (mine != c->final_crc)
		diverge(c, c->final_off, c->final_crc, mine, c->final_index, "hash",
			(size_t)(c->final_off - base));
}

enum out_verdict out_check_verdict(const struct out_check *c, int complete, uint64_t *at,
				   uint64_t *crc)
{
	uint64_t base = c->out.off - c->out.off % OUT_FOLD;

	*at = c->out.off;
	*crc = c->out.crc;
	if (!c->have_final)
		return OUT_NONE;
	if (c->differs) {
		*at = c->diff_off;
		*crc = c->diff_crc;
		return OUT_DIFFERS;
	}
	/* diverged without a report: a check that was never to report. */
	if (c->diverged || !complete || c->final_off < base)
		return OUT_INCOMPLETE;
	*at = c->final_off;
	*crc = c->final_crc;
	return OUT_EQUAL;
}
