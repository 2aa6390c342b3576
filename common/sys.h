/* The libc calls that the shim interposes, as the coordinator makes them.
 *
 * Inside a server, libapus.so exports wrappers named accept4, read, send,
 * close, epoll_wait, clock_gettime, ...; a plain call of one of these from coordinator
 * code would bind to the wrapper, and pass only because the wrapper lets
 * an untracked fd through.  So the coordinator calls them through `sys`
 * only: the shim points it at the real functions (dlsym RTLD_NEXT, the
 * table it calls itself) before the node starts; elsewhere (the CLI, the
 * unit tests) it holds libc's own.  An indirect call costs what the PLT's
 * indirect jump does, so this is free on the hot path. */
#ifndef APUS_SYS_H
#define APUS_SYS_H

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>

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
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
	/* The wall clock is interposed too (preload/clock.c): inside a window
	 * of logged input it is that input's stamp (input_clock.h). */
	int (*clock_gettime)(clockid_t, struct timespec *);
	int (*gettimeofday)(struct timeval *, void *);
	time_t (*time)(time_t *);
	/* And randomness (preload/random.c): inside a window the server's
	 * draws are the entry's (input_random.h); outside, the devices and
	 * getrandom() are the boot stream.  Our own keys and nonces come
	 * from the kernel (sys_random_bytes). */
	ssize_t (*getrandom)(void *, size_t, unsigned int);
	int (*getentropy)(void *, size_t);
	int (*rand)(void);
	long (*random)(void);
	double (*drand48)(void);
	long (*lrand48)(void);
	long (*mrand48)(void);
	double (*erand48)(unsigned short[3]);
	long (*nrand48)(unsigned short[3]);
	long (*jrand48)(unsigned short[3]);
	int (*rand_r)(unsigned int *);
	uint32_t (*arc4random)(void);
	void (*arc4random_buf)(void *, size_t);
	uint32_t (*arc4random_uniform)(uint32_t);
	FILE *(*fopen)(const char *, const char *);
	FILE *(*fopen64)(const char *, const char *);
	/* ... whose devices may also be open()ed and read(). */
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*openat64)(int, const char *, int, ...);
	int (*__open_2)(const char *, int);
	int (*__open64_2)(const char *, int);
	/* And the waits for children (preload/child.c, input_child.h). */
	pid_t (*wait4)(pid_t, int *, int, struct rusage *);
};

extern struct socket_calls sys;

/* Points `sys` at CALLS (the shim's real functions); before any
 * coordinator thread runs. */
void sys_use(const struct socket_calls *calls);

/* LEN bytes from the kernel's generator (getrandom, never the log's);
 * 0, or -errno. */
int sys_random_bytes(void *buf, size_t len);

#endif
