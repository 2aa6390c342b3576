/* The output check: a replica whose output equals the leader's never
 * diverges, however both streams are cut into writes and whenever the
 * leader's checkpoints arrive; a difference anywhere — a middle byte, the
 * last byte, a missing tail — is reported once, at the right offset. */
#include <string.h>

#include "checker/crc64.h"
#include "checker/outcheck.h"
#include "tests/unit/unit.h"

#define LEN 100000

static unsigned char leader[LEN], replica[LEN + 5000];
static struct { uint64_t off, crc; } marks[LEN / OUT_FOLD + 2];
static int nmarks, reports;
static uint64_t reported_off;

static void on_mark(void *arg, uint64_t off, uint64_t crc)
{
	(void)arg;
	marks[nmarks].off = off;
	marks[nmarks++].crc = crc;
}

static void on_diverge(void *arg, uint64_t offset, uint64_t lc, uint64_t rc, uint64_t index,
		       const char *why, const void *ex, size_t len)
{
	(void)arg, (void)lc, (void)rc, (void)index, (void)why, (void)ex, (void)len;
	reports++;
	reported_off = offset;
}

/* Runs the leader over LEN bytes and the replica over RLEN bytes of
 * `replica`, interleaving the leader's checkpoints at random, or (LEADER_FIRST)
 * delivering them all first, as the log usually does. */
static void run_mode(size_t rlen, int leader_first)
{
	struct out_hash lh = { 0, 0 };
	static struct out_check c;
	size_t off = 0, roff = 0;
	int next = 0;

	nmarks = reports = 0;
	while (off < LEN) {
		size_t n = (size_t)rand() % 4000 + 1;
		if (n > LEN - off)
			n = LEN - off;
		out_hash_feed(&lh, leader + off, n, on_mark, NULL);
		off += n;
	}
	out_check_init(&c, on_diverge, NULL);
	while (roff < rlen || next < nmarks) {
		if (next < nmarks && (roff >= rlen || leader_first || rand() % 2)) {
			out_check_leader(&c, marks[next].off, marks[next].crc, 1);
			next++;
			continue;
		}
		size_t n = (size_t)rand() % 5000 + 1;
		if (n > rlen - roff)
			n = rlen - roff;
		out_check_absorb(&c, replica + roff, n);
		roff += n;
	}
	out_check_leader_final(&c, lh.off, lh.crc, 2);
	out_check_finish(&c);
}

static void run(size_t rlen)
{
	run_mode(rlen, 0);
}

int main(void)
{
	srand(23);
	for (size_t i = 0; i < LEN; i++)
		leader[i] = (unsigned char)rand();

	for (int round = 0; round < 20; round++) {
		memcpy(replica, leader, LEN);
		run(LEN);
		CHECK(reports == 0, "round %d: identical output reported at %llu", round,
		      (unsigned long long)reported_off);
	}
	memcpy(replica, leader, LEN);
	replica[LEN - 1] ^= 0x20;
	run(LEN);
	CHECK(reports == 1 && reported_off == LEN, "last byte: %d reports, offset %llu", reports,
	      (unsigned long long)reported_off);

	memcpy(replica, leader, LEN);
	replica[50000] ^= 1;
	run(LEN);
	CHECK(reports == 1 && reported_off > 50000, "middle byte: %d reports, at %llu", reports,
	      (unsigned long long)reported_off);
	run_mode(LEN, 1);
	CHECK(reports == 1 && reported_off == (50000 / OUT_FOLD + 1) * OUT_FOLD,
	      "middle byte, checkpoints first: %d reports, at %llu", reports,
	      (unsigned long long)reported_off);

	memcpy(replica, leader, LEN);
	run(LEN - 10);
	CHECK(reports == 1, "missing tail: %d reports", reports);

	/* The leader's client left early: the replica read on past the leader's
	 * end; that alone is no divergence. */
	memcpy(replica, leader, LEN);
	memset(replica + LEN, 'x', 5000);
	run(LEN + 5000);
	CHECK(reports == 0, "replica ran ahead: reported at %llu", (unsigned long long)reported_off);
	return 0;
}
