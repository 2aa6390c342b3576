/* select() and pselect(): for servers that wait with them (libupnp), what
 * poll.c does for poll().  A select() whose read set holds a replicated
 * connection or the listener becomes a poll() of the same fds through
 * shim_poll_ms(), and its answer the sets again, with select()'s meaning:
 * readable on POLLIN, POLLHUP or POLLERR, writable on POLLOUT or POLLERR,
 * exceptional on POLLPRI; a closed fd in a set is EBADF; the timeval is
 * left with the time not waited, as Linux's select() does.  Others pass
 * through. */
#include <errno.h>
#include <poll.h>
#include <sys/select.h>
#include <time.h>

#include "common/clock.h"
#include "shim.h"

/* Whether READ holds, below NFDS, a fd the shim acts on for input. */
static int reads_clients(int nfds, const fd_set *read)
{
	for (int fd = 0; fd < nfds; fd++) {
		const struct fd_slot *s;

		if (FD_ISSET(fd, read) && (s = fd_lookup(fd)) && fd_ops_of(s)->waits)
			return 1;
	}
	return 0;
}

static int select_as_poll(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int timeout_ms,
			  const sigset_t *sigmask)
{
	struct pollfd fds[FD_SETSIZE];
	nfds_t n = 0;
	int rc, count = 0;

	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) |
				   (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
				   (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));

		if (ev)
			fds[n++] = (struct pollfd){ fd, ev, 0 };
	}
	rc = shim_poll_ms(fds, n, timeout_ms, sigmask);
	if (rc < 0)
		return -1;
	for (nfds_t i = 0; i < n; i++)
		if (fds[i].revents & POLLNVAL) {
			errno = EBADF;
			return -1;
		}
	for (nfds_t i = 0; i < n; i++) {
		int fd = fds[i].fd;
		short re = fds[i].revents;

		if (rd && FD_ISSET(fd, rd) && !(re & (POLLIN | POLLHUP | POLLERR)))
			FD_CLR(fd, rd);
		if (wr && FD_ISSET(fd, wr) && !(re & (POLLOUT | POLLERR)))
			FD_CLR(fd, wr);
		if (ex && FD_ISSET(fd, ex) && !(re & POLLPRI))
			FD_CLR(fd, ex);
		count += (rd && FD_ISSET(fd, rd)) + (wr && FD_ISSET(fd, wr)) + (ex && FD_ISSET(fd, ex));
	}
	return count;
}

static int shim_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
		       const sigset_t *sigmask, struct timeval *left)
{
	uint64_t start = now_ns(), wait_ns;
	int timeout_ms = -1, rc;

	if (tmo) {
		uint64_t ms = (uint64_t)tmo->tv_sec * 1000 + (uint64_t)(tmo->tv_nsec + 999999) / 1000000;

		timeout_ms = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
	}
	rc = select_as_poll(nfds, rd, wr, ex, timeout_ms, sigmask);
	if (left && tmo) {
		uint64_t want = (uint64_t)tmo->tv_sec * 1000000000ULL + (uint64_t)tmo->tv_nsec;

		wait_ns = now_ns() - start;
		want = wait_ns >= want ? 0 : want - wait_ns;
		left->tv_sec = (time_t)(want / 1000000000ULL);
		left->tv_usec = (suseconds_t)(want % 1000000000ULL / 1000);
	}
	return rc;
}

static int ours(int nfds, const fd_set *rd)
{
	return rd && nfds > 0 && nfds <= FD_SETSIZE && shim_enter() && shim_node &&
	       reads_clients(nfds, rd);
}

APUS_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	struct timespec ts;

	real_resolve();
	if (!ours(nfds, rd))
		return real.select(nfds, rd, wr, ex, tv);
	if (tv) {
		ts.tv_sec = tv->tv_sec;
		ts.tv_nsec = tv->tv_usec * 1000L;
	}
	return shim_select(nfds, rd, wr, ex, tv ? &ts : NULL, NULL, tv);
}

APUS_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
			const sigset_t *sigmask)
{
	real_resolve();
	if (!ours(nfds, rd))
		return real.pselect(nfds, rd, wr, ex, tmo, sigmask);
	return shim_select(nfds, rd, wr, ex, tmo, sigmask, NULL);
}
