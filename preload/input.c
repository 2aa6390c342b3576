/* The read family.  On the leader, bytes the server reads from a client
 * are replicated (a RECV entry) before the server sees them, and end of
 * stream becomes the connection's CLOSE.  On a backup, reads on replay
 * connections tell replay what the server has consumed.  Errors and EAGAIN
 * pass through untouched. */
#include <errno.h>

#include "../coordinator/replay.h"
#include "shim.h"

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;

	for (int i = 0; i < iovcnt; i++)
		t += iov[i].iov_len;
	return t;
}

static ssize_t after_input(struct fd_slot *s, const struct iovec *iov, int iovcnt, ssize_t n)
{
	/* A zero-length read returns 0 without meaning end of stream. */
	if (n < 0 || (n == 0 && iov_total(iov, iovcnt) == 0))
		return n;
	if (s->kind == FD_REPLAY) {
		replay_tap_read(shim_node->replay, s->tap, n);
		return n;
	}
	if (n == 0) {
		shim_log_close(s);
		return 0;
	}
	if (node_propose(shim_node, ENTRY_RECV, s->conn, iov, iovcnt, (size_t)n, NULL)) {
		/* Not replicated, so the server must not act on it. */
		errno = ECONNRESET;
		return -1;
	}
	return n;
}

APUS_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct fd_slot *s;

	real_resolve();
	if (!(s = shim_tracked(fd)))
		return real.read(fd, buf, len);
	struct iovec iov = { buf, len };
	return after_input(s, &iov, 1, real.read(fd, buf, len));
}

APUS_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct fd_slot *s;

	real_resolve();
	if (!(s = shim_tracked(fd)))
		return real.readv(fd, iov, iovcnt);
	return after_input(s, iov, iovcnt, real.readv(fd, iov, iovcnt));
}

APUS_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
		 socklen_t *alen)
{
	struct fd_slot *s;

	real_resolve();
	/* A peek leaves the bytes in the socket: they count when really read. */
	if (!(s = shim_tracked(fd)) || (flags & MSG_PEEK))
		return real.recvfrom(fd, buf, len, flags, addr, alen);
	struct iovec iov = { buf, len };
	return after_input(s, &iov, 1, real.recvfrom(fd, buf, len, flags, addr, alen));
}

APUS_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct fd_slot *s;

	real_resolve();
	if (!(s = shim_tracked(fd)) || (flags & MSG_PEEK))
		return real.recv(fd, buf, len, flags);
	struct iovec iov = { buf, len };
	return after_input(s, &iov, 1, real.recv(fd, buf, len, flags));
}

APUS_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct fd_slot *s;

	real_resolve();
	if (!(s = shim_tracked(fd)) || (flags & MSG_PEEK))
		return real.recvmsg(fd, msg, flags);
	ssize_t n = real.recvmsg(fd, msg, flags);
	return after_input(s, msg->msg_iov, (int)msg->msg_iovlen, n);
}
