/* The outcomes of a replica's last finished output checks, kept in its
 * control page for `apus verify`, which reads them from another process
 * while the replica writes them: a ring of the last CHECKS_KEEP
 * (struct node_status: checks, check[]), and the answer to verify's
 * question (struct verify_words), which no number of other connections
 * can push out.  One writer of each entry (the node's replay, under its
 * out_lock), readers never block it: an entry is a small seqlock whose
 * sequence number (the check's number) is unique. */
#ifndef APUS_CHECKS_H
#define APUS_CHECKS_H

#include <stdint.h>

#include "checker/outcheck.h"

struct check_result;
struct node_status;
struct region_ctl;

/* Node: records the verdict of C, the check of connection (CONN_VIEW,
 * CONN_IDX) whose output ended (COMPLETE: all of it was absorbed), in
 * CTL's ring, and as the answer when it is about verify's question;
 * nothing when the leader gave no final mark.  A few stores, no wait. */
void checks_record(struct region_ctl *ctl, uint64_t conn_view, uint64_t conn_idx,
		   const struct out_check *c, int complete);

/* How many checks S has published so far. */
uint64_t checks_count(const struct node_status *s);

/* Copies check number SEQ (1 ..) of S, a live mapping, into *OUT.
 * Returns 0; -ENOENT when the ring holds another check there (SEQ was
 * overwritten, or is not written yet); -EAGAIN when the entry changed while
 * it was copied (try again). */
int checks_read(const struct node_status *s, uint64_t seq, struct check_result *out);

/* CLI: asks the node of CTL (mapped writable) to keep the check of a
 * connection whose leader's final mark is (OFF, CRC) as its answer to
 * question Q (nonzero, unique to the asker). */
void checks_ask(struct region_ctl *ctl, uint64_t q, uint64_t off, uint64_t crc);
/* CLI: withdraws question Q, unless another asker's replaced it. */
void checks_unask(struct region_ctl *ctl, uint64_t q);
/* CLI: the node's answer to question Q about the mark (OFF, CRC) into
 * *OUT: 0; -ENOENT none yet; -EAGAIN it changed while copied. */
int checks_answer(const struct region_ctl *ctl, uint64_t q, uint64_t off, uint64_t crc,
		  struct check_result *out);

#endif
