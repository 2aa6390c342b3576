/* The libc entry points the shim replaces, resolved once with
 * dlsym(RTLD_NEXT) and called through this table only. */
#ifndef APUS_REAL_H
#define APUS_REAL_H

#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct socket_calls {
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*listen)(int, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	pid_t (*fork)(void);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
};

extern struct socket_calls real;

extern int real_resolved;
void real_resolve_slow(void);

/* Fills `real` (once; safe to call from any wrapper at any time). */
static inline void real_resolve(void)
{
	/* Pairs with the release store at the end of resolving. */
	if (__builtin_expect(!__atomic_load_n(&real_resolved, __ATOMIC_ACQUIRE), 0))
		real_resolve_slow();
}

#endif
