/* The write family.  With commit_wait = reply, a reply to a client leaves
 * only once everything the server has read so far is committed (output
 * commit); otherwise output passes through.  These wrappers are also where
 * the output checker (checker/) will hash each connection's stream. */
#include "shim.h"

/* Holds a reply to a replicated client until its inputs are committed. */
static inline void before_output(int fd)
{
	struct fd_slot *s = shim_tracked(fd);

	if (s && s->kind == FD_CLIENT && shim_node->cfg.commit_wait == COMMIT_WAIT_REPLY)
		node_wait_output(shim_node);
}

APUS_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	real_resolve();
	before_output(fd);
	return real.write(fd, buf, len);
}

APUS_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	real_resolve();
	before_output(fd);
	return real.writev(fd, iov, iovcnt);
}

APUS_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	real_resolve();
	before_output(fd);
	return real.send(fd, buf, len, flags);
}

APUS_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			   const struct sockaddr *addr, socklen_t alen)
{
	real_resolve();
	before_output(fd);
	return real.sendto(fd, buf, len, flags, addr, alen);
}

APUS_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	real_resolve();
	before_output(fd);
	return real.sendmsg(fd, msg, flags);
}
