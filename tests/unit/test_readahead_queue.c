/* The leader's read-ahead order queue (preload/order_queue.h): clients
 * whose bytes were read ahead are queued in log order; only the head may
 * read (any other client, with or without bytes, waits) unless the head
 * stalled; a consumed or forgotten client leaves the queue wherever it
 * is and the rest keep their order; new bytes of a client go to the tail.
 * Then thousands of random pushes and unlinks against a plain array. */
#include <stdint.h>
#include <string.h>

#include "common/clock.h"
#include "preload/order_queue.h"
#include "tests/unit/unit.h"

#define NFD 64
#define NEVER UINT64_MAX	/* a stall threshold never reached */

static struct oq_link links[NFD];

static struct oq_link *link_of(int fd)
{
	CHECK(fd >= 0 && fd < NFD, "link of fd %d", fd);
	return &links[fd];
}

static struct order_queue q = ORDER_QUEUE_INIT(link_of);

/* The queue's fds from its head, into OUT; returns how many. */
static int walk(int *out)
{
	int n = 0;

	for (int f = __atomic_load_n(&q.head, __ATOMIC_ACQUIRE); f >= 0; f = oq_next(&q, f)) {
		CHECK(n < NFD, "the queue loops");
		out[n++] = f;
	}
	return n;
}

/* The queue is exactly WANT[0..N), its tail is the last, every fd in it
 * is marked queued and no other is. */
static void expect(const int *want, int n, int line)
{
	int got[NFD], m = walk(got), in[NFD] = { 0 };

	if (m != n || memcmp(got, want, sizeof(int) * (size_t)n)) {
		fprintf(stderr, "line %d: queue is", line);
		for (int i = 0; i < m; i++)
			fprintf(stderr, " %d", got[i]);
		fprintf(stderr, ", want");
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %d", want[i]);
		fputc('\n', stderr);
		exit(1);
	}
	CHECK(q.tail == (n ? want[n - 1] : -1), "line %d: tail %d", line, q.tail);
	CHECK(q.head == (n ? want[0] : -1), "line %d: head %d", line, q.head);
	for (int i = 0; i < n; i++)
		in[want[i]] = 1;
	for (int fd = 0; fd < NFD; fd++)
		CHECK(links[fd].queued == in[fd], "line %d: fd %d queued = %d", line, fd,
		      links[fd].queued);
}

#define EXPECT(...)                                                            \
	do {                                                                   \
		const int w_[] = { __VA_ARGS__ };                              \
		expect(w_ + 1, (int)(sizeof(w_) / sizeof(w_[0])) - 1, __LINE__); \
	} while (0)

/* Only HEAD may read (-1: everybody). */
static void only_head_reads(int head, int line)
{
	for (int fd = 0; fd < NFD; fd++)
		CHECK(oq_may_read(&q, fd, NEVER) == (head < 0 || fd == head),
		      "line %d: fd %d may%s read with %d at the head", line, fd,
		      head < 0 || fd == head ? " not" : "", head);
}

static void scripted(void)
{
	uint64_t t0;

	for (int fd = 0; fd < NFD; fd++)
		links[fd] = (struct oq_link){ -1, 0 };
	EXPECT(0);
	only_head_reads(-1, __LINE__);

	/* Bytes of 5, 3, 9 read ahead in this log order. */
	oq_push(&q, 5);
	oq_push(&q, 3);
	oq_push(&q, 9);
	EXPECT(0, 5, 3, 9);
	only_head_reads(5, __LINE__);

	/* 5 consumed its bytes: 3 is next; 5 (no bytes now) waits too. */
	t0 = q.head_since;
	oq_unlink(&q, 5);
	EXPECT(0, 3, 9);
	only_head_reads(3, __LINE__);
	CHECK(q.head_since >= t0, "the new head's time was not taken");

	/* 5's next bytes come later in the log than 9's. */
	oq_push(&q, 5);
	EXPECT(0, 3, 9, 5);
	/* A client forgotten in the middle, then at the tail. */
	oq_unlink(&q, 9);
	EXPECT(0, 3, 5);
	only_head_reads(3, __LINE__);
	oq_unlink(&q, 5);
	EXPECT(0, 3);
	oq_push(&q, 7);
	EXPECT(0, 3, 7);
	/* One not queued: nothing changes. */
	oq_unlink(&q, 9);
	oq_unlink(&q, 40);
	EXPECT(0, 3, 7);
	only_head_reads(3, __LINE__);
	oq_unlink(&q, 3);
	only_head_reads(7, __LINE__);
	oq_unlink(&q, 7);
	EXPECT(0);
	only_head_reads(-1, __LINE__);
	CHECK(!oq_head_stalled(&q, 0), "an empty queue stalled");

	/* A head that waits past the threshold lets the others read, and
	 * says so once; a new head starts a fresh wait. */
	oq_push(&q, 4);
	oq_push(&q, 6);
	CHECK(!oq_head_stalled(&q, NEVER), "a fresh head stalled");
	CHECK(!oq_may_read(&q, 6, 1000000000ULL), "6 read before 4 within a second");
	q.head_since = now_ns() - 300000000ULL;	/* the head came 300 ms ago */
	CHECK(!oq_may_read(&q, 6, 1000000000ULL), "6 read before 4 within a second");
	CHECK(!q.warned, "a stall was reported before the threshold");
	CHECK(oq_may_read(&q, 6, 200000000ULL), "6 still waits for a head stalled 300 ms");
	CHECK(q.warned == 1, "the stall was not reported");
	CHECK(oq_may_read(&q, 9, 200000000ULL) && q.warned == 1, "stall");
	oq_unlink(&q, 4);
	EXPECT(0, 6);
	CHECK(!q.warned, "the new head inherited the old one's stall report");
	CHECK(!oq_may_read(&q, 4, 200000000ULL), "4 read before 6: the stall carried over");
	CHECK(oq_may_read(&q, 6, 200000000ULL), "the head may not read");
	oq_unlink(&q, 6);
	EXPECT(0);
}

/* Random pushes (of fds not queued) and unlinks against an array. */
static void random_model(void)
{
	int model[NFD], n = 0;
	unsigned seed = 12345;

	for (int op = 0; op < 20000; op++) {
		seed = seed * 1103515245u + 12345u;
		int fd = (int)(seed >> 16) % NFD;

		if (links[fd].queued) {
			int i = 0;

			while (model[i] != fd)
				i++;
			memmove(model + i, model + i + 1, sizeof(int) * (size_t)(n - i - 1));
			n--;
			oq_unlink(&q, fd);
		} else if ((seed >> 8) & 1) {
			model[n++] = fd;
			oq_push(&q, fd);
		} else {
			oq_unlink(&q, fd);	/* not queued: a no-op */
		}
		expect(model, n, __LINE__);
		CHECK(q.head == (n ? model[0] : -1), "op %d: head %d", op, q.head);
		CHECK(oq_may_read(&q, fd, NEVER) == (!n || model[0] == fd), "op %d: fd %d", op, fd);
	}
}

int main(void)
{
	scripted();
	random_model();
	printf("ok\n");
	return 0;
}
