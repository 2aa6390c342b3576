/* The read-ahead order queue: see order_queue.h. */
#define LOG_PREFIX "shim: "
#include "order_queue.h"

#include "common/clock.h"
#include "common/logger.h"

static void set_head(struct order_queue *q, int fd)
{
	/* Pairs with the acquire loads of head in readahead.c. */
	__atomic_store_n(&q->head, fd, __ATOMIC_RELEASE);
	q->head_since = now_ns();
	q->warned = 0;
}

void oq_push(struct order_queue *q, int fd)
{
	struct oq_link *l = q->link(fd);

	l->next = -1;
	l->queued = 1;
	if (q->tail >= 0)
		q->link(q->tail)->next = fd;
	else
		set_head(q, fd);
	q->tail = fd;
}

void oq_unlink(struct order_queue *q, int fd)
{
	struct oq_link *l = q->link(fd);
	int prev = -1, f = q->head;

	if (!l->queued)
		return;
	while (f >= 0 && f != fd) {
		prev = f;
		f = q->link(f)->next;
	}
	if (f == fd) {
		if (prev < 0)
			set_head(q, l->next);
		else
			q->link(prev)->next = l->next;
		if (q->tail == fd)
			q->tail = prev;
	}
	l->queued = 0;
	l->next = -1;
}

int oq_next(struct order_queue *q, int fd)
{
	return q->link(fd)->next;
}

int oq_head_stalled(struct order_queue *q, uint64_t stall_ns)
{
	if (q->head < 0 || now_ns() - q->head_since < stall_ns)
		return 0;
	if (!q->warned) {
		q->warned = 1;
		pr_warn("the server left read-ahead input of fd %d unread for %llu ms; letting it "
			"read other clients first (replay order is no longer guaranteed for it)",
			q->head, (unsigned long long)(stall_ns / 1000000));
	}
	return 1;
}

int oq_may_read(struct order_queue *q, int fd, uint64_t stall_ns)
{
	return q->head < 0 || q->head == fd || oq_head_stalled(q, stall_ns);
}
