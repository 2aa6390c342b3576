/* The write family.  Output passes through unchanged; these wrappers are
 * where the output checker (checker/) will hash each connection's stream. */
#include "shim.h"

APUS_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	real_resolve();
	return real.write(fd, buf, len);
}

APUS_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	real_resolve();
	return real.writev(fd, iov, iovcnt);
}

APUS_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	real_resolve();
	return real.send(fd, buf, len, flags);
}

APUS_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr,
	       socklen_t alen)
{
	real_resolve();
	return real.sendto(fd, buf, len, flags, addr, alen);
}

APUS_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	real_resolve();
	return real.sendmsg(fd, msg, flags);
}
