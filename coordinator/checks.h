/* The outcomes of a replica's last finished output checks, kept in its
 * control page (struct node_status: checks, check[]) for `apus verify`,
 * which reads them from another process while the replica writes them.
 * One writer (the node's replay, under its out_lock); readers never block
 * it: each entry is a small seqlock whose sequence number is unique. */
#ifndef APUS_CHECKS_H
#define APUS_CHECKS_H

#include <stdint.h>

#include "../checker/outcheck.h"
#include "region.h"

/* Records the verdict of C, the check of connection (CONN_VIEW, CONN_IDX)
 * whose output ended (COMPLETE: all of it was absorbed), into S; nothing
 * when the leader gave no final mark.  A few stores, no wait. */
void checks_record(struct node_status *s, uint64_t conn_view, uint64_t conn_idx,
		   const struct out_check *c, int complete);

/* How many checks S has published so far. */
uint64_t checks_count(const struct node_status *s);

/* Copies check number SEQ (1 ..) of S, a live mapping, into *OUT.
 * Returns 0; -ENOENT when the ring holds another check there (SEQ was
 * overwritten, or is not written yet); -EAGAIN when the entry changed while
 * it was copied (try again). */
int checks_read(const struct node_status *s, uint64_t seq, struct check_result *out);

#endif
