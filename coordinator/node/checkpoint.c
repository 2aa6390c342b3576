/* The node's half of a checkpoint (design §7; the guard's half is
 * guard/checkpoint.c).  A backup asked for a checkpoint stops executing
 * entries, so the CRIU image the guard dumps next holds its server exactly
 * at the entry it reports; agreement and acks go on meanwhile (the leader
 * never waits for it).  A process restored from such an image finds the
 * guard's restore generation newer than the one it remembers: its server
 * and memory are back at the checkpoint while its region (the durable log)
 * is not, so it joins its leader again from where its server stands. */
#define LOG_PREFIX "checkpoint: "
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "coordinator/input/input_random.h"
#include "common/logger.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/node/replay.h"

/* A hold the guard never released (it died mid-dump) ends after this. */
#define HOLD_MAX_NS (30ULL * 1000000000ULL)
/* How long an answer waits for the server to consume what it was sent. */
#define DRAIN_MAX_NS (2ULL * 1000000000ULL)
/* ... and to answer what it read (a request read in part is not). */
#define ANSWER_WAIT_NS (200 * 1000000ULL)

void node_checkpoint_init(struct node *n)
{
	n->ckpt.restore_seen = load64(&region_mail(n->ctl)->ckpt.restore_gen);
	/* A fresh region starts with no request pending. */
}

int node_checkpoint_poll(struct node *n)
{
	struct ckpt_words *w = &region_mail(n->ctl)->ckpt;
	uint64_t gen = load64(&w->restore_gen), req;
	int restored = 0;

	if (gen != n->ckpt.restore_seen) {
		n->ckpt.restore_seen = gen;
		__atomic_store_n(&n->ckpt.hold, 0, __ATOMIC_RELEASE);
		/* A fresh start may have written its pid here since the dump. */
		store64(&n->status->pid, (uint64_t)getpid());
		if (n->ops->restored)
			n->ops->restored(n->tp);
		pr_info("restored from a checkpoint at entry %llu: joining the leader from there",
			(unsigned long long)n->exec.idx - 1);
		/* Judged again from the state the server now holds: the image's
		 * entry, and the log as it is now (it may have been reclaimed
		 * past that entry since the dump).  What the image remembers of
		 * its own recoverability was true of another log. */
		node_snapshot_check(n);
		node_snapshot_reload(n);
		restored = 1;
	}
	if (n->ckpt.hold) {
		if (load64(&w->release) >= n->ckpt.hold || node_role(n) != ROLE_BACKUP ||
		    now_ns() - n->ckpt.hold_ns > HOLD_MAX_NS) {
			if (load64(&w->release) < n->ckpt.hold) {
				pr_warn("checkpoint %llu never released: executing again",
					(unsigned long long)n->ckpt.hold);
				store64(&w->broken, n->ckpt.hold);
			}
			__atomic_store_n(&n->ckpt.hold, 0, __ATOMIC_RELEASE);
		}
	}
	req = load64(&w->req);
	/* One hold at a time: our own snapshot's comes first, and the whole
	 * of it: a CRIU image taken while its command (and the server's fork
	 * for it) runs would hold those processes too, and a restore would
	 * need their pids free. */
	if (req != load64(&w->ack) && !node_snapshot_running(n)) {
		int backup = node_role(n) == ROLE_BACKUP;

		/* (A request the guard already gave up on is answered, not held.) */
		if (backup && n->ckpt.hold != req && load64(&w->release) < req) {
			__atomic_store_n(&n->ckpt.hold, req, __ATOMIC_RELEASE);
			n->ckpt.hold_ns = now_ns();
		}
		/* Answer once the server took every turn already sent to it (a
		 * snapshot the guard asks the server for next then holds exactly
		 * the entries up to idx), or after DRAIN_MAX_NS regardless: the
		 * CRIU image holds unread bytes too, and `drained` says which. */
		int unaccepted = backup ? replay_unaccepted(n->exec.replay) : 0;
		/* ... and closed its window (it may still draw in it). */
		int drained = backup && !replay_maintain(n->exec.replay) && !unaccepted &&
			      !input_random_windows_open();
		/* ... and answered what it read, given a moment (a snapshot
		 * would cut a request read in part; snapshot.c's hold). */
		int mid = drained ? replay_mid_requests(n->exec.replay, NULL) : 0;
		if (backup && !drained && now_ns() - n->ckpt.hold_ns < DRAIN_MAX_NS)
			return restored;
		if (mid && now_ns() - n->ckpt.hold_ns < ANSWER_WAIT_NS)
			return restored;
		if (backup) {
			store64(&w->idx, n->exec.idx - 1);
			store64(&w->pos, n->exec.pos);
			store64(&w->view, n->exec.view);
			store64(&w->drained, (uint64_t)drained);
			store64(&w->open_conns, (uint64_t)replay_open_conns(n->exec.replay));
			store64(&w->unaccepted, (uint64_t)unaccepted);
			store64(&w->mid_requests, (uint64_t)mid);
			store64(&w->rand_mark, drained ? input_random_mark() : UINT64_MAX);
		}
		store64(&w->refused, !backup);
		/* The answer last: the guard reads the words above after it. */
		store64(&w->ack, req);
	}
	return restored;
}
