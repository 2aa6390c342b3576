/* apus verify's side of the output check: a client that hashes every
 * byte it received (out_hash_feed, however recv() cut them) gets exactly
 * the leader's final mark (length and CRC-64 of what the leader's server
 * wrote, however write() cut it), which is what the leader puts in the
 * CLOSE entry; and a replica's check of the same connection then records
 * the verdict apus verify matches against it: equal for the same bytes,
 * differs for one byte changed or a missing tail, incomplete when its
 * output never ended or ran a fold past the leader's end. */
#include <string.h>

#include "checker/crc64.h"
#include "checker/outcheck.h"
#include "tests/unit/unit.h"

#define LEN 50000

static unsigned char out[LEN + 4000];
/* The leader's marks at every OUT_FOLD bytes (its HASH entries). */
static struct { uint64_t off, crc; } marks[LEN / OUT_FOLD + 2];
static int nmarks;

static void on_mark(void *arg, uint64_t off, uint64_t crc)
{
	(void)arg;
	marks[nmarks].off = off;
	marks[nmarks++].crc = crc;
}

/* Hashes LEN bytes of BUF the way each side cuts them: pieces of 1..MAX;
 * with MARKS, keeps the marks (the leader's side). */
static struct out_hash hash_in_pieces(const unsigned char *buf, size_t len, size_t max,
				      int with_marks)
{
	struct out_hash h = { 0, 0 };

	if (with_marks)
		nmarks = 0;
	for (size_t off = 0; off < len;) {
		size_t n = (size_t)rand() % max + 1;
		if (n > len - off)
			n = len - off;
		out_hash_feed(&h, buf + off, n, with_marks ? on_mark : NULL, NULL);
		off += n;
	}
	return h;
}

static void ignore(void *arg, uint64_t offset, uint64_t lc, uint64_t rc, uint64_t index,
		   const char *why, const void *ex, size_t len)
{
	(void)arg, (void)offset, (void)lc, (void)rc, (void)index, (void)why, (void)ex, (void)len;
}

/* A replica's verdict on RLEN bytes of REPLICA against the leader's marks
 * and its final mark LEADER; COMPLETE as in out_check_verdict. */
static enum out_verdict replica_verdict(const unsigned char *replica, size_t rlen,
					struct out_hash leader, int complete, uint64_t *at)
{
	static struct out_check c;
	uint64_t crc;

	out_check_init(&c, ignore, NULL);
	for (int i = 0; i < nmarks; i++)
		out_check_leader(&c, marks[i].off, marks[i].crc, 1);
	for (size_t off = 0; off < rlen;) {
		size_t n = (size_t)rand() % 3000 + 1;
		if (n > rlen - off)
			n = rlen - off;
		out_check_absorb(&c, replica + off, n);
		off += n;
	}
	out_check_leader_final(&c, leader.off, leader.crc, 1);
	if (complete)
		out_check_finish(&c);
	return out_check_verdict(&c, complete, at, &crc);
}

int main(void)
{
	static unsigned char replica[sizeof(out)];
	uint64_t at;

	srand(18);
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (unsigned char)rand();

	for (size_t len = 0; len <= LEN; len = len ? len * 3 : 1) {
		struct out_hash leader = hash_in_pieces(out, len, 4000, 1);	/* its server's writes */
		struct out_hash client = hash_in_pieces(out, len, 65536, 0);	/* verify's recv()s */

		CHECK(client.off == leader.off && client.crc == leader.crc,
		      "%zu bytes: client (%llu, %016llx), leader's final mark (%llu, %016llx)", len,
		      (unsigned long long)client.off, (unsigned long long)client.crc,
		      (unsigned long long)leader.off, (unsigned long long)leader.crc);
		CHECK(client.crc == crc64(0, out, len), "%zu bytes: not CRC-64/Jones of the stream", len);
		CHECK(replica_verdict(out, len, leader, 1, &at) == OUT_EQUAL && at == len,
		      "%zu bytes: the same output is not equal (at %llu)", len, (unsigned long long)at);
	}

	struct out_hash leader = hash_in_pieces(out, LEN, 4000, 1);

	memcpy(replica, out, LEN);
	replica[LEN / 2] ^= 1;
	CHECK(replica_verdict(replica, LEN, leader, 1, &at) == OUT_DIFFERS && at > LEN / 2 &&
		      at - LEN / 2 <= OUT_FOLD,
	      "one byte changed: not differs at the next mark (at %llu)", (unsigned long long)at);
	replica[LEN / 2] ^= 1;
	replica[LEN - 1] ^= 1;
	CHECK(replica_verdict(replica, LEN, leader, 1, &at) == OUT_DIFFERS && at == LEN,
	      "last byte changed: at %llu", (unsigned long long)at);
	CHECK(replica_verdict(out, LEN - 10, leader, 1, &at) == OUT_DIFFERS && at == LEN - 10,
	      "missing tail: at %llu", (unsigned long long)at);
	CHECK(replica_verdict(out, LEN, leader, 0, &at) == OUT_INCOMPLETE,
	      "an output that never ended counts");
	/* Ran on past the leader's end (its client hung up with replies
	 * unread): equal while the final CRC can still be taken, then
	 * incomplete, never equal by default. */
	CHECK(replica_verdict(out, LEN + 100, leader, 1, &at) == OUT_EQUAL && at == LEN,
	      "ran 100 bytes past the leader's end");
	CHECK(replica_verdict(out, LEN + 3500, leader, 1, &at) == OUT_INCOMPLETE,
	      "ran two folds past the leader's end");
	return 0;
}
