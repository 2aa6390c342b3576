/* In-place reads on a backup, the epoll side.  Once the server watches a
 * replay connection with epoll, the backup thread holds the connection's
 * bytes instead of sending them through the socket (turns.h): the server's
 * read copies them from there (turns.h's replay_read), and its
 * epoll_wait() reports ready the connection whose turn it is (here).  A
 * server blocked in epoll_wait() is woken through an eventfd we put in
 * its set; its events never reach the server.  No socket, no copy in the
 * kernel, no wake-up of the server for a connection that may not be read
 * yet. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/node/turns.h"
#include "shim.h"

/* Our eventfd's data in the server's sets: neither an fd nor a pointer. */
#define KICK_DATA 0xfffffffffffffff1ULL

/* The replay waker of SET (its id; 0 is also the common one). */
static int waker_of(const struct fd_slot *set)
{
	int w = __atomic_load_n(&set->epoll.waker, __ATOMIC_ACQUIRE);

	return w ? w - 1 : 0;
}

void inplace_set_watches(int epfd, struct fd_slot *set)
{
	struct replay *r = node_replay(shim_node);
	struct epoll_event ev = { EPOLLIN, { .u64 = KICK_DATA } };
	int w;

	if (__atomic_load_n(&set->epoll.waker, __ATOMIC_ACQUIRE))
		return;
	/* Two threads may watch their first replay connection in one set at
	 * once: one waker wins, the other goes back. */
	w = replay_waker_open(r);
	if (real.epoll_ctl(epfd, EPOLL_CTL_ADD, replay_waker_fd(r, w), &ev) && errno != EEXIST) {
		replay_waker_close(r, w);
		return;
	}
	int none = 0;
	if (!__atomic_compare_exchange_n(&set->epoll.waker, &none, w + 1, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		real.epoll_ctl(epfd, EPOLL_CTL_DEL, replay_waker_fd(r, w), NULL);
		replay_waker_close(r, w);
	}
}

void inplace_set_closed(struct fd_slot *set)
{
	int w = __atomic_exchange_n(&set->epoll.waker, 0, __ATOMIC_ACQ_REL);

	if (w && shim_node)
		replay_waker_close(node_replay(shim_node), w - 1);
}

#define READY_CAP 64

/* Events for the held turns that come next, whose connections EPFD
 * watches: the server reads them in this order, each freeing the next. */
static int ready_turns(int epfd, int waker, struct epoll_event *out, int cap)
{
	int fds[READY_CAP], n, k = 0;

	n = replay_ready_fds(node_replay(shim_node), waker, fds,
			     cap < READY_CAP ? cap : READY_CAP);
	for (int i = 0; i < n; i++) {
		struct fd_slot *s = fd_lookup(fds[i]);
		if (!epoll_wants_input(epfd, s, FD_REPLAY))
			break;
		out[k++] = (struct epoll_event){ EPOLLIN, { .u64 = s->ep_data } };
	}
	return k;
}

/* Drops our eventfd's events from EV[0..n); returns the new count. */
static int drop_kicks(struct epoll_event *ev, int n, int *kicked)
{
	int out = 0;

	for (int i = 0; i < n; i++) {
		if (ev[i].data.u64 == KICK_DATA)
			*kicked = 1;
		else
			ev[out++] = ev[i];
	}
	return out;
}

int inplace_wait(int epfd, struct fd_slot *set, struct epoll_event *ev, int max, int timeout,
		 const sigset_t *sigmask, real_wait_fn wait)
{
	struct replay *r = node_replay(shim_node);
	int w = waker_of(set), here, n, kicked = 0, slept = 0;

	here = ready_turns(epfd, w, ev, max);
	if (here == max)
		return here;
	if (!here && timeout && replay_server_sleep(r, w))
		slept = 1;
	else if (!here && (here = ready_turns(epfd, w, ev, max)) == max)
		return here;
	n = wait(epfd, ev + here, max - here, here ? 0 : timeout, sigmask);
	if (slept) {
		int e = errno;	/* the server's EINTR must survive draining the eventfd */
		replay_server_awake(r, w);
		errno = e;
	}
	if (n < 0) {
		if (!here)
			return n;
		n = 0;
	}
	n = here + drop_kicks(ev + here, n, &kicked);
	if (kicked && !here) {
		/* Woken for held turns: they go first. */
		struct epoll_event first[READY_CAP];
		int k = ready_turns(epfd, w, first, max - n);
		memmove(ev + k, ev, sizeof(*ev) * (size_t)n);
		memcpy(ev, first, sizeof(*ev) * (size_t)k);
		here = k;
		n += k;
	}
	return epoll_merge_events(ev, here, n);
}

int inplace_drop_kicks(struct fd_slot *set, struct epoll_event *ev, int n)
{
	int kicked = 0;
	uint64_t v;

	n = drop_kicks(ev, n, &kicked);
	/* EAGAIN is fine: another thread drained it. */
	if (kicked && read(replay_waker_fd(node_replay(shim_node), waker_of(set)), &v,
			   sizeof(v)) != sizeof(v))
		v = 0;
	return n;
}
