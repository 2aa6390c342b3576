/* A replica's side of the output check for one connection: hashes what its
 * server wrote back, and compares with the leader's marks, which may
 * arrive before or after the replica's own output reaches their offset. */
#ifndef APUS_OUTCHECK_H
#define APUS_OUTCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "checker/outhash.h"

#define OUT_KEEP 64	/* marks remembered on each side */

/* Called once per connection, at its first difference. */
typedef void (*diverge_fn)(void *arg, uint64_t offset, uint64_t leader_crc, uint64_t replica_crc,
			   uint64_t index, const char *why, const void *excerpt, size_t len);

struct out_check {
	struct out_hash out;
	uint64_t bound_crc;		/* CRC at the last multiple of OUT_FOLD */
	char win[OUT_FOLD];		/* the bytes since then */
	struct { uint64_t off, crc; } mine[OUT_KEEP];
	/* The leader's marks our output has not reached yet, oldest
	 * first.  The CRC is cumulative, so when they are too many to keep, the
	 * newest replaces the last kept one: any later mark still
	 * catches a difference before it. */
	struct { uint64_t off, crc, index; } theirs[OUT_KEEP];
	unsigned nmine, th_head, th_tail;
	int have_final;
	uint64_t final_off, final_crc, final_index;
	int diverged;
	int differs;		/* a difference was reported: at diff_off, ours diff_crc */
	uint64_t diff_off, diff_crc;
	diverge_fn fn;
	void *arg;
};

void out_check_init(struct out_check *c, diverge_fn fn, void *arg);
/* The replica's server wrote LEN more bytes. */
void out_check_absorb(struct out_check *c, const void *buf, size_t len);
/* The leader's mark at OFF (a multiple of OUT_FOLD), from entry INDEX. */
void out_check_leader(struct out_check *c, uint64_t off, uint64_t crc, uint64_t index);
/* The leader's final mark (its whole output), from the CLOSE entry. */
void out_check_leader_final(struct out_check *c, uint64_t off, uint64_t crc, uint64_t index);
/* The replica's output is complete: compare the final mark. */
void out_check_finish(struct out_check *c);

/* What a finished check says about the connection's whole output. */
enum out_verdict {
	OUT_NONE = 0,		/* no final mark of the leader: nothing to say */
	OUT_EQUAL,		/* byte for byte the leader's (by CRC-64) */
	OUT_DIFFERS,		/* a difference was reported */
	OUT_INCOMPLETE,		/* not compared to the end (see out_check_verdict) */
};

/* The verdict on C once its connection is done; COMPLETE: the replica's
 * whole output went through out_check_finish.  Incomplete: the output did
 * not end (the connection was dropped), the check was switched off (a
 * connection adopted after a snapshot), or the replica wrote more than
 * OUT_FOLD bytes past the leader's end (its final CRC was not kept).  *AT
 * and *CRC: where it stands (struct check_result's `at`, `replica_crc`). */
enum out_verdict out_check_verdict(const struct out_check *c, int complete, uint64_t *at,
				   uint64_t *crc);

#endif
