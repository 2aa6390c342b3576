/* The mailboxes of a node's control page: the requests the guard and the
 * CLI post to the node, in words they write, and the node's answers, in
 * words it writes; each struct says which side writes which word.  No peer
 * writes here (region_peer_may_write).  They lie at REGION_MAIL_OFF of the
 * control page (region.h has the map).  A new mailbox goes at the end of
 * struct region_mail, as a status field does (region_status.h); one in
 * use is never changed in place. */
#ifndef APUS_REGION_MAIL_H
#define APUS_REGION_MAIL_H

#include <stdint.h>

#include "coordinator/storage/region_status.h"	/* struct check_result */

struct region_ctl;

/* The guard's checkpoint handshake (coordinator/node/checkpoint.c): the guard
 * asks with a new `req`; a backup answers `ack` = req once it holds
 * execution at entry `idx` (log position `pos`) and its server consumed
 * what was sent before (`drained`; bounded wait), so the CRIU image it
 * dumps next is that state; it executes again once `release` >= req.  A
 * leader answers `refused` (it is never paused).  `restore_gen` is bumped by
 * the guard before a criu restore: the restored process kept the older
 * value in its memory and so learns that it came back from an image. */
struct ckpt_words {
	uint64_t req;		/* guard */
	uint64_t release;	/* guard */
	uint64_t restore_gen;	/* guard */
	uint64_t ack;		/* node: the request answered */
	uint64_t idx;		/* node: last entry executed at the checkpoint */
	uint64_t pos;		/* node: log position past it */
	uint64_t view;		/* node: its view */
	uint64_t refused;	/* node: nonzero: ack refused the request (not a backup) */
	uint64_t drained;	/* node: its server had consumed every entry up to idx */
	/* node: the clients' connections its server had open at idx (a
	 * snapshot there cannot continue their sessions: snapshot_connections
	 * = none refuses such a point). */
	uint64_t open_conns;
	/* node: a hold it left before its release (it was elected, or
	 * HOLD_MAX passed): that request.  Written before it executes
	 * anything past idx, so a snapshot taken under that hold (which then
	 * may hold more than idx) is known for what it is. */
	uint64_t broken;
	/* node: connections its replay opened at or before idx that the
	 * server had not accepted yet.  They wait in the listening socket's
	 * backlog, which CRIU does not dump (it fails: "In-flight
	 * connection"): the guard does not try. */
	uint64_t unaccepted;
	/* node: its server's generator's mark at idx (input_random.h;
	 * UINT64_MAX: unknown), for a snapshot the guard takes there. */
	uint64_t rand_mark;
	/* Guard (ckpt_take only), for the metrics endpoint: checkpoints
	 * taken of this region's process, the last one's dump time and
	 * image size. */
	uint64_t taken;
	uint64_t dump_ms;
	uint64_t image_bytes;
	/* Guard: checkpoints that failed in a row (0 after a success), the
	 * last failure's time (CLOCK_REALTIME ms) and its first line. */
	uint64_t failures;
	uint64_t error_ms;
	char error[256];
	/* node: connections whose input its server had read at idx and not
	 * answered (replay_mid_requests: a request may be read in part, and a
	 * snapshot there would cut it). */
	uint64_t mid_requests;
};

/* apus verify's question to a node, and the node's answer
 * (coordinator/storage/checks.h).  The CLI writes want_*: "record the check of a
 * connection whose leader's final mark is (want_off, want_crc) here too",
 * want_seq (the question's number; 0: none) last.  The node writes
 * `answered` (the question it answers) and `answer` under answer.seq, as
 * an entry of status.check is written, with that check's number. */
struct verify_words {
	uint64_t want_off;	/* CLI */
	uint64_t want_crc;	/* CLI */
	uint64_t want_seq;	/* CLI */
	uint64_t answered;	/* node */
	struct check_result answer;	/* node */
};

/* A membership change asked of the leader (coordinator/node/members.h): the
 * CLI writes the membership it wants into <data_dir>/apus.members.want,
 * then want_seq (the question's number); the leader answers with
 * `answered` = want_seq last: the entry it proposed (idx) or why not
 * (err, a negative errno, and why). */
struct member_words {
	uint64_t want_seq;	/* CLI */
	uint64_t idx;		/* node */
	int64_t err;		/* node */
	uint64_t answered;	/* node */
	char why[96];		/* node */
};

struct region_mail {
	struct ckpt_words ckpt;
	struct verify_words verify;
	struct member_words member;
};

/* Where the mailboxes start in the control page. */
#define REGION_MAIL_OFF 4864

/* The mailboxes of the control page CTL; const when CTL is. */
#define region_mail(ctl)                                                                     \
	_Generic((ctl),                                                                      \
		struct region_ctl *: (struct region_mail *)((char *)(ctl) + REGION_MAIL_OFF),   \
		const struct region_ctl *: (const struct region_mail *)((const char *)(ctl) +  \
									 REGION_MAIL_OFF))

#endif
