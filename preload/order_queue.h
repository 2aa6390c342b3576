/* The read-ahead order queue (readahead.c): the fds whose bytes were read
 * ahead and replicated, in the log's order.  Only the head's bytes may be
 * consumed (backups replay input in log order), unless the head stalled.
 * The links live in each fd's table slot; LINK finds them.  Kept apart
 * from the shim's interposed calls so a unit test can drive it.  The
 * caller serialises every call but the acquire load of `head`. */
#ifndef APUS_ORDER_QUEUE_H
#define APUS_ORDER_QUEUE_H

#include <stdint.h>

struct oq_link {
	int next;		/* the next fd in the queue, -1 at its end */
	int queued;		/* in the queue */
};

struct order_queue {
	int head, tail;		/* -1: empty; head is stored with release */
	uint64_t head_since;	/* when the head last changed */
	int warned;		/* the head's stall was logged */
	struct oq_link *(*link)(int fd);
};

#define ORDER_QUEUE_INIT(linkfn) { -1, -1, 0, 0, linkfn }

/* Appends FD (its bytes are the log's newest). */
void oq_push(struct order_queue *q, int fd);
/* Takes FD out wherever it is; nothing if it is not queued. */
void oq_unlink(struct order_queue *q, int fd);
/* The fd after FD in the queue, -1 at its end. */
int oq_next(struct order_queue *q, int fd);
/* Whether the head has waited STALL_NS or longer, so that order is given
 * up for it (logged once per head). */
int oq_head_stalled(struct order_queue *q, uint64_t stall_ns);
/* Whether FD may consume input now: the queue is empty, FD heads it, or
 * the head stalled. */
int oq_may_read(struct order_queue *q, int fd, uint64_t stall_ns);

#endif
