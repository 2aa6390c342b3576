/* Read-ahead on the leader (read_ahead = on): with commit_wait = read, one
 * commit wait per event-loop pass instead of one per read(); with reply,
 * one ring of the backups per pass instead of one per read().
 *
 * When epoll_wait() returns, the bytes waiting on every replicated client
 * it reports readable are read at once and replicated as one batch (RECV
 * entries in the order of the events, one ring of the backups, one wait
 * for the last entry).  The server then reads them from here at no cost.
 *
 * Backups let their server consume input in log order only (replay
 * turns), so the leader's server must consume in log order too: while
 * read-ahead bytes wait, a read of any other client gets EAGAIN, and the
 * next epoll_wait() reports that client ready again, as it reports the
 * clients whose bytes still wait here (their sockets no longer hold them).
 * Servers handle their events in the order epoll returns them (Redis,
 * libevent), so this almost never happens.  A server that leaves read-ahead
 * bytes unread for RA_STALL_NS may read the others: logged, as backups do
 * after their own stall.
 *
 * Only events whose data is the fd (data.fd, as Redis and libevent
 * register them) are recognised; other servers keep the per-read path. */
#define LOG_PREFIX "shim: "
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "coordinator/input/input_clock.h"
#include "common/logger.h"
#include "order_queue.h"
#include "shim.h"

#define RA_DEFAULT_WANT 16384		/* before the server asked anything */
#define RA_MAX_WANT (256 << 10)
#define RA_BATCH 64			/* reads replicated per commit wait at most */
#define RA_STALL_NS (200 * 1000000ULL)
#define RETRY_CAP 1024

static pthread_mutex_t ra_lock = PTHREAD_MUTEX_INITIALIZER;
/* Serialises batches, so the order queue is the log's order. */
static pthread_mutex_t ra_fill_lock = PTHREAD_MUTEX_INITIALIZER;

/* The order queue: clients with read-ahead bytes, in log order (ra_lock
 * held, but for the acquire loads of its head). */
static struct oq_link *ra_link(int fd)
{
	return &fd_lookup(fd)->client.ra_link;
}

static struct order_queue ra_q = ORDER_QUEUE_INIT(ra_link);

/* Clients told EAGAIN to keep log order, to be reported ready again. */
static int retry_fds[RETRY_CAP];
static int nretry;

int readahead_active(void)
{
	struct node *n = shim_node;

	/* thread_order = requests orders each read with its request: the
	 * per-read path. */
	return n && node_config(n)->read_ahead && node_serving(n) && !request_order_on();
}

int readahead_pending(void)
{
	return __atomic_load_n(&ra_q.head, __ATOMIC_ACQUIRE) >= 0;
}

void readahead_lock(void)
{
	pthread_mutex_lock(&ra_lock);
}

void readahead_unlock(void)
{
	pthread_mutex_unlock(&ra_lock);
}

/* --- The order queue (ra_lock held): order_queue.c --- */

static void drop_bytes(int fd, struct fd_slot *s)
{
	oq_unlink(&ra_q, fd);
	free(s->client.ra_buf);
	s->client.ra_buf = NULL;
	s->client.ra_off = s->client.ra_len = 0;
}

/* --- The server's reads --- */

void readahead_reset(struct fd_slot *s)
{
	s->ep_set = 0;
	s->client.ra_buf = NULL;
	s->client.ra_off = s->client.ra_len = 0;
	s->client.ra_want = 0;
	s->client.ra_err = 0;
	s->client.ra_link = (struct oq_link){ -1, 0 };
	s->client.ra_retry = 0;
}

void readahead_forget(int fd, struct fd_slot *s)
{
	pthread_mutex_lock(&ra_lock);
	drop_bytes(fd, s);
	s->client.ra_retry = 0;
	s->client.ra_err = 0;
	pthread_mutex_unlock(&ra_lock);
}

int readahead_take(int fd, struct fd_slot *s, const struct iovec *iov, int iovcnt, int peek,
		   ssize_t *ret)
{
	size_t want = iov_total(iov, iovcnt);

	if (!peek && want)
		s->client.ra_want = want > RA_MAX_WANT ? RA_MAX_WANT : (uint32_t)want;
	/* Nothing read ahead anywhere (always so off the read-ahead path). */
	if (!__atomic_load_n(&s->client.ra_len, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&s->client.ra_err, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&ra_q.head, __ATOMIC_ACQUIRE) < 0)
		return 0;
	if (!want)
		return 0;
	pthread_mutex_lock(&ra_lock);
	if (s->client.ra_len > s->client.ra_off) {
		if (!peek && !oq_may_read(&ra_q, fd, RA_STALL_NS))
			goto keep_order;
		*ret = (ssize_t)iov_scatter(iov, iovcnt, s->client.ra_buf + s->client.ra_off,
					    s->client.ra_len - s->client.ra_off);
		node_input_handed(shim_node, s->client.ra_idx);	/* a peek shows it too */
		if (!peek) {
			input_window_enter(s->client.ra_stamp, s->client.ra_idx);
			if (*ret > 0)
				answers_heard(s, s->client.ra_stamp);
			s->client.ra_off += (uint32_t)*ret;
			if (s->client.ra_off == s->client.ra_len)
				drop_bytes(fd, s);
		}
	} else if (s->client.ra_err) {
		errno = s->client.ra_err;
		if (!peek)
			s->client.ra_err = 0;
		*ret = -1;
	} else if (!peek && ra_q.head >= 0 && !oq_head_stalled(&ra_q, RA_STALL_NS)) {
		goto keep_order;
	} else {
		pthread_mutex_unlock(&ra_lock);
		return 0;
	}
	pthread_mutex_unlock(&ra_lock);
	return 1;
keep_order:
	if (!s->client.ra_retry && nretry < RETRY_CAP) {
		s->client.ra_retry = 1;
		retry_fds[nretry++] = fd;
	}
	pthread_mutex_unlock(&ra_lock);
	errno = EAGAIN;
	*ret = -1;
	return 1;
}

/* --- epoll --- */

/* The client slot an event of EPFD stands for, or NULL. */
static struct fd_slot *event_slot(int epfd, const struct epoll_event *e)
{
	struct fd_slot *s = fd_lookup(e->data.fd);

	if (!s || s->kind != FD_CLIENT || s->ep_set != epfd + 1 || s->ep_data != e->data.u64)
		return NULL;
	return s;
}

/* Events for the clients of EPFD whose input is ready here rather than in
 * their sockets: read-ahead bytes in log order, then those told EAGAIN. */
static int ready_here(int epfd, struct epoll_event *out, int cap)
{
	int n = 0, kept = 0;

	pthread_mutex_lock(&ra_lock);
	for (int f = ra_q.head; f >= 0 && n < cap; f = oq_next(&ra_q, f)) {
		struct fd_slot *s = fd_lookup(f);
		if (epoll_wants_input(epfd, s, FD_CLIENT))
			out[n++] = (struct epoll_event){ EPOLLIN, { .u64 = s->ep_data } };
	}
	for (int i = 0; i < nretry; i++) {
		struct fd_slot *s = fd_lookup(retry_fds[i]);
		if (!s || !s->client.ra_retry)
			continue;
		if (n < cap && epoll_wants_input(epfd, s, FD_CLIENT) && !s->client.ra_link.queued) {
			out[n++] = (struct epoll_event){ EPOLLIN, { .u64 = s->ep_data } };
			s->client.ra_retry = 0;
			continue;
		}
		if (s->client.ra_link.queued)
			s->client.ra_retry = 0;	/* reported with its bytes */
		else
			retry_fds[kept++] = retry_fds[i];
	}
	nretry = kept;
	pthread_mutex_unlock(&ra_lock);
	return n;
}

struct chunk {
	int fd;
	struct fd_slot *s;
	char *buf;
	struct iovec iov;
};

/* Replicates the COUNT chunks as one batch and queues them in log order;
 * if that fails, their clients get ECONNRESET (as on the per-read path). */
static void replicate(struct chunk *c, int count)
{
	struct proposal p[RA_BATCH] = { 0 };
	int rc;

	for (int i = 0; i < count; i++)
		p[i] = (struct proposal){ .type = ENTRY_RECV,
					  .flags = answers_flags(c[i].s),
					  .conn = c[i].s->client.conn,
					  .iov = &c[i].iov,
					  .iovcnt = 1,
					  .len = c[i].iov.iov_len };
	rc = node_propose_batch(shim_node, p, count);
	pthread_mutex_lock(&ra_lock);
	for (int i = 0; i < count; i++) {
		struct fd_slot *s = c[i].s;

		if (rc || s->kind != FD_CLIENT) {
			free(c[i].buf);
			s->client.ra_err = ECONNRESET;
			continue;
		}
		s->client.ra_buf = c[i].buf;
		s->client.ra_off = 0;
		s->client.ra_stamp = p[i].stamp_ms;
		s->client.ra_idx = p[i].idx;
		__atomic_store_n(&s->client.ra_len, (uint32_t)c[i].iov.iov_len, __ATOMIC_RELAXED);
		oq_push(&ra_q, c[i].fd);
	}
	pthread_mutex_unlock(&ra_lock);
}

/* Reads ahead what every readable client among EV[0..n) has waiting. */
static void read_ahead(int epfd, const struct epoll_event *ev, int n)
{
	struct chunk c[RA_BATCH];
	int count = 0;

	pthread_mutex_lock(&ra_fill_lock);
	for (int i = 0; i < n; i++) {
		struct fd_slot *s = event_slot(epfd, &ev[i]);

		if (!s || !(ev[i].events & EPOLLIN) || s->client.ra_len || s->client.ra_err ||
		    s->client.closed_logged)
			continue;
		size_t want = s->client.ra_want ? s->client.ra_want : RA_DEFAULT_WANT;
		char *buf = malloc(want);
		if (!buf)
			continue;
		ssize_t k = real.recvfrom(ev[i].data.fd, buf, want, MSG_DONTWAIT, NULL, NULL);
		if (k <= 0) {
			/* End of stream and errors reach the server by its own read. */
			free(buf);
			continue;
		}
		c[count++] = (struct chunk){ ev[i].data.fd, s, buf, { buf, (size_t)k } };
		if (count == RA_BATCH) {
			replicate(c, count);
			count = 0;
		}
	}
	if (count)
		replicate(c, count);
	pthread_mutex_unlock(&ra_fill_lock);
}

int readahead_wait(int epfd, struct epoll_event *ev, int max, int timeout,
		   const sigset_t *sigmask, real_wait_fn wait)
{
	int here, n;

	here = ready_here(epfd, ev, max < 64 ? max : 64);
	if (here == max)
		return here;
	n = wait(epfd, ev + here, max - here, here ? 0 : timeout, sigmask);
	if (n < 0) {
		if (!here)
			return n;
		n = 0;
	}
	n = epoll_merge_events(ev, here, here + n);
	/* A snapshot of the leader waits for the server to read every entry
	 * logged: meanwhile reads take the per-read path. */
	if (n && !node_snapshot_armed(shim_node) && node_input_room(shim_node, 0, 0))
		read_ahead(epfd, ev, n);
	return n;
}
