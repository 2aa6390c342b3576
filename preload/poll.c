/* poll() and ppoll(): servers that wait for their clients without epoll
 * (clamd's accept-and-read thread).
 *
 * Such a server reads a connection the kernel reports readable and takes
 * a failed read for an error on it (clamd drops the connection).  The shim
 * refuses some reads the kernel would serve (EAGAIN, input.c):
 *   - on a backup, a replay connection's read out of turn: the role thread
 *     writes a connection's bytes into its socket ahead of their turn;
 *   - on the leader, a client's read while the log has no room for it.
 * So poll() reports a connection readable only while its read would get
 * input (fd_ops.h's poll_ready).  One the kernel reports early is left out of
 * the answer and hidden from the kernel's next wait (a negative fd is
 * skipped), which then lasts at most HIDDEN_SLICE_MS before they are
 * looked at again: a turn comes when the schedule's head moves, room when
 * the log is reclaimed, and no fd of the set says either.  So a server
 * polls in slices only while input waits in its sockets for a turn or for
 * room, and sleeps in the kernel otherwise.
 *
 * A poll() that watches the application's listener, or a replicated
 * connection among other fds, is an event loop waiting for its clients:
 * its thread's request is done (thread_order = requests), its clock is
 * the machine's again, and the listening thread is done loading its
 * state, as for epoll_wait() (epoll.c).  (clamd's reading thread polls
 * its clients and a wake-up pipe, its accepting thread the listener.)  A
 * poll() of one connection alone is not: a thread per connection
 * (MariaDB's) polls its client in the middle of a request too.  select()
 * and pselect() come here too (select.c). */
#include <errno.h>
#include <poll.h>
#include <time.h>

#include "common/clock.h"
#include "coordinator/input/input_clock.h"
#include "coordinator/node/node.h"
#include "coordinator/node/turns.h"
#include "shim.h"

#define HIDDEN_SLICE_MS 1
#define HIDE_MAX 256		/* connections hidden at once, at most */

/* What FDS watches: WATCH_INPUT, a replicated connection for input;
 * WATCH_LISTENER, the application's listener. */
#define WATCH_INPUT 1
#define WATCH_LISTENER 2
static int watches(const struct pollfd *fds, nfds_t nfds)
{
	int what = 0;

	for (nfds_t i = 0; i < nfds; i++) {
		struct fd_slot *s = fds[i].fd >= 0 ? fd_lookup(fds[i].fd) : NULL;

		if (!s)
			continue;
		if ((fd_ops_of(s)->waits & FD_WAIT_INPUT) && (fds[i].events & POLLIN))
			what |= WATCH_INPUT;
		else if (fd_ops_of(s)->waits & FD_WAIT_ACCEPT)
			what |= WATCH_LISTENER;
	}
	return what;
}

/* Takes out of the kernel's answer RC the connections it reports early:
 * readable while the shim would refuse their read.  Their indices go to
 * EARLY (at most HIDE_MAX), their count to *NEARLY; returns the count
 * left. */
static int drop_early(struct pollfd *fds, nfds_t nfds, int rc, nfds_t *early, int *nearly)
{
	*nearly = 0;
	for (nfds_t i = 0; rc > 0 && i < nfds; i++) {
		struct fd_slot *s;

		if (!fds[i].revents || fds[i].fd < 0 || !(fds[i].events & POLLIN) ||
		    !(s = fd_lookup(fds[i].fd)))
			continue;
		if (!fd_ops_of(s)->poll_ready || fd_ops_of(s)->poll_ready(fds[i].fd, s))
			continue;
		fds[i].revents = 0;
		rc--;
		if (*nearly < HIDE_MAX)
			early[*nearly] = i;
		(*nearly)++;
	}
	return rc;
}

typedef int (*kernel_poll_fn)(struct pollfd *fds, nfds_t nfds, int timeout_ms,
			      const sigset_t *sigmask);

/* Milliseconds left until DEADLINE_NS (-1: none). */
static int left_ms(uint64_t deadline_ns)
{
	uint64_t now = now_ns();

	if (deadline_ns == UINT64_MAX)
		return -1;
	return now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999) / 1000000);
}

/* The server's poll of a set of its clients (TIMEOUT_MS < 0: no end).
 * While no connection is early it is the kernel's poll; while some are,
 * they are hidden and the wait goes in slices. */
static int ordered_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms,
		       const sigset_t *sigmask, kernel_poll_fn kernel)
{
	uint64_t deadline_ns = timeout_ms < 0 ? UINT64_MAX
					      : now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	nfds_t early[HIDE_MAX];
	int nearly, rc, wait_ms;

	/* Early ones make the kernel answer at once: then they are hidden. */
	rc = kernel(fds, nfds, timeout_ms, sigmask);
	for (;;) {
		nearly = 0;
		if (rc > 0)
			rc = drop_early(fds, nfds, rc, early, &nearly);
		if (rc != 0 || !(wait_ms = left_ms(deadline_ns)))
			return rc;
		if (!nearly) {
			rc = kernel(fds, nfds, wait_ms, sigmask);
			continue;
		}
		if (wait_ms < 0 || wait_ms > HIDDEN_SLICE_MS)
			wait_ms = HIDDEN_SLICE_MS;
		if (nearly > HIDE_MAX) {
			/* Too many to hide: look again after a slice. */
			struct timespec slice = { 0, wait_ms * 1000000L };

			nanosleep(&slice, NULL);
			rc = kernel(fds, nfds, 0, sigmask);
			continue;
		}
		for (int i = 0; i < nearly; i++)
			fds[early[i]].fd = -1 - fds[early[i]].fd;
		rc = kernel(fds, nfds, wait_ms, sigmask);
		for (int i = 0; i < nearly; i++)
			fds[early[i]].fd = -1 - fds[early[i]].fd;
		/* Another look at all of them, the hidden ones' turns too. */
		if (rc >= 0)
			rc = kernel(fds, nfds, 0, sigmask);
	}
}

static int kernel_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms, const sigset_t *sigmask)
{
	(void)sigmask;
	return real.poll(fds, nfds, timeout_ms);
}

static int kernel_ppoll(struct pollfd *fds, nfds_t nfds, int timeout_ms, const sigset_t *sigmask)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };

	return real.ppoll(fds, nfds, timeout_ms < 0 ? NULL : &ts, sigmask);
}

static int shim_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms, const sigset_t *sigmask,
		     kernel_poll_fn kernel)
{
	int what;

	if (!shim_enter() || !shim_node || !nfds || !(what = watches(fds, nfds)))
		return kernel(fds, nfds, timeout_ms, sigmask);
	if ((what & WATCH_LISTENER) || nfds > 1) {
		input_window_leave();
		if (timeout_ms && shim_app_thread)
			node_app_ready(shim_node);
		request_order_idle();
	}
	if (!(what & WATCH_INPUT))
		return kernel(fds, nfds, timeout_ms, sigmask);
	return ordered_poll(fds, nfds, timeout_ms, sigmask, kernel);
}

int shim_poll_ms(struct pollfd *fds, nfds_t nfds, int timeout_ms, const sigset_t *sigmask)
{
	return shim_poll(fds, nfds, timeout_ms, sigmask, sigmask ? kernel_ppoll : kernel_poll);
}

APUS_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	real_resolve();
	return shim_poll(fds, nfds, timeout, NULL, kernel_poll);
}

APUS_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		      const sigset_t *sigmask)
{
	int timeout_ms = -1;

	real_resolve();
	if (tmo) {
		uint64_t ms = (uint64_t)tmo->tv_sec * 1000 + (uint64_t)(tmo->tv_nsec + 999999) / 1000000;

		timeout_ms = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
		/* Exact (sub-millisecond) timeouts of other sets go to the kernel as given. */
		if (!shim_enter() || !shim_node || !watches(fds, nfds))
			return real.ppoll(fds, nfds, tmo, sigmask);
	}
	return shim_poll(fds, nfds, timeout_ms, sigmask, kernel_ppoll);
}
