/* epoll, where the shim serves input itself: the server's sets must
 * report ready what is ready with us rather than in a socket.  On the
 * leader, read-ahead (readahead.c); on a backup, replay turns held for
 * in-place reads (inplace.c).  Sets of our own threads (their calls come
 * here too) and sets that watch no replicated connection pass through. */
#include <errno.h>

#include "coordinator/input/input_clock.h"
#include "coordinator/node/turns.h"
#include "shim.h"

int epoll_wants_input(int epfd, const struct fd_slot *s, int kind)
{
	return s && (int)s->kind == kind && s->ep_set == epfd + 1 && (s->ep_events & EPOLLIN);
}

int epoll_merge_events(struct epoll_event *ev, int first, int n)
{
	int out = first;

	for (int i = first; i < n; i++) {
		int j = 0;

		while (j < first && ev[j].data.u64 != ev[i].data.u64)
			j++;
		if (j < first)
			ev[j].events |= ev[i].events;
		else
			ev[out++] = ev[i];
	}
	return out;
}

static int wait_plain(int epfd, struct epoll_event *ev, int max, int timeout,
		      const sigset_t *sigmask)
{
	(void)sigmask;
	return real.epoll_wait(epfd, ev, max, timeout);
}

static int wait_sigmask(int epfd, struct epoll_event *ev, int max, int timeout,
			const sigset_t *sigmask)
{
	return real.epoll_pwait(epfd, ev, max, timeout, sigmask);
}

static int shim_wait(int epfd, struct epoll_event *ev, int max, int timeout,
		     const sigset_t *sigmask, real_wait_fn wait)
{
	struct fd_slot *set;

	/* Done with the input it read: its clock is the machine's again. */
	input_window_leave();
	/* The thread that listens now waits for events: the server is done
	 * loading its state (it polls without waiting while it loads). */
	if (timeout && shim_app_thread && shim_node)
		node_app_ready(shim_node);
	/* Waiting for events: this thread's request is done. */
	if (shim_node && shim_enter())
		request_order_idle();
	if (max <= 0 || !shim_enter() || !(set = fd_lookup(epfd)) ||
	    !__atomic_load_n(&set->epoll.clients, __ATOMIC_ACQUIRE) || !shim_node)
		return wait(epfd, ev, max, timeout, sigmask);
	if (!node_serving(shim_node))
		return inplace_wait(epfd, set, ev, max, timeout, sigmask, wait);
	int n = readahead_active() ? readahead_wait(epfd, ev, max, timeout, sigmask, wait)
				   : wait(epfd, ev, max, timeout, sigmask);
	/* A backup's eventfd may still sit in the set of a node that leads now. */
	if (n > 0 && __atomic_load_n(&set->epoll.waker, __ATOMIC_ACQUIRE))
		n = inplace_drop_kicks(set, ev, n);
	return n;
}

APUS_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	real_resolve();
	return shim_wait(epfd, ev, max, timeout, NULL, wait_plain);
}

APUS_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
			    const sigset_t *sigmask)
{
	real_resolve();
	return shim_wait(epfd, ev, max, timeout, sigmask, wait_sigmask);
}

/* The replay waker of the set EP_SET (an fd plus 1; 0: none). */
static int set_waker(int ep_set)
{
	struct fd_slot *set = ep_set ? fd_lookup(ep_set - 1) : NULL;
	int w = set ? __atomic_load_n(&set->epoll.waker, __ATOMIC_ACQUIRE) : 0;

	return w ? w - 1 : 0;
}

/* A replay connection's watch: with replay_in_place, the backup thread
 * holds the bytes of one the server watches for input (turns.h), and the
 * set's waker wakes the server for them (inplace.c). */
void replay_fd_watched(int epfd, struct fd_slot *s, struct fd_slot *set)
{
	if (set)
		inplace_set_watches(epfd, set);
	replay_tap_watch(node_replay(shim_node), s->replay.tap,
			 node_config(shim_node)->replay_in_place && s->ep_set &&
				 (s->ep_events & EPOLLIN),
			 set_waker(s->ep_set));
}

APUS_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *e)
{
	struct fd_slot *s, *set;
	int rc;

	real_resolve();
	rc = real.epoll_ctl(epfd, op, fd, e);
	if (rc || !(s = shim_tracked(fd)))
		return rc;
	set = op != EPOLL_CTL_DEL ? fd_slot_get(epfd) : NULL;
	readahead_lock();
	if (op == EPOLL_CTL_DEL) {
		if (s->ep_set == epfd + 1)
			s->ep_set = 0;
	} else if (e) {
		s->ep_set = epfd + 1;
		s->ep_events = e->events;
		s->ep_data = e->data.u64;
	}
	if (fd_ops_of(s)->watched)
		fd_ops_of(s)->watched(epfd, s, set);
	readahead_unlock();
	/* Last: a wait on the set finds a replay connection's waker in it. */
	if (set)
		__atomic_store_n(&set->epoll.clients, 1, __ATOMIC_RELEASE);
	return rc;
}
