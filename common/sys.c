#include "common/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

/* glibc's entry points of a fortified open() (bits/fcntl2.h), declared
 * here for builds without _FORTIFY_SOURCE. */
extern int __open_2(const char *, int);
extern int __open64_2(const char *, int);

/* libc's, until the shim says otherwise (sys.h).  Inside libapus.so these
 * relocations resolve to the shim's own wrappers: sys_use() replaces them
 * before the node starts, and nothing of the coordinator runs before. */
struct socket_calls sys = {
	.accept = accept,
	.accept4 = accept4,
	.listen = listen,
	.read = read,
	.readv = readv,
	.recv = recv,
	.recvfrom = recvfrom,
	.recvmsg = recvmsg,
	.write = write,
	.writev = writev,
	.send = send,
	.sendto = sendto,
	.sendmsg = sendmsg,
	.close = close,
	.shutdown = shutdown,
	.fork = fork,
	.epoll_ctl = epoll_ctl,
	.epoll_wait = epoll_wait,
	.epoll_pwait = epoll_pwait,
	.poll = poll,
	.ppoll = ppoll,
	.select = select,
	.pselect = pselect,
	.clock_gettime = clock_gettime,
	.gettimeofday = gettimeofday,
	.time = time,
	.getrandom = getrandom,
	.getentropy = getentropy,
	.rand = rand,
	.random = random,
	.drand48 = drand48,
	.lrand48 = lrand48,
	.mrand48 = mrand48,
	.erand48 = erand48,
	.nrand48 = nrand48,
	.jrand48 = jrand48,
	.rand_r = rand_r,
	.arc4random = arc4random,
	.arc4random_buf = arc4random_buf,
	.arc4random_uniform = arc4random_uniform,
	.fopen = fopen,
	.fopen64 = fopen64,
	.open = open,
	.open64 = open64,
	.openat = openat,
	.openat64 = openat64,
	.__open_2 = __open_2,
	.__open64_2 = __open64_2,
	.wait4 = wait4,
};

void sys_use(const struct socket_calls *calls)
{
	/* An entry the shim could not resolve keeps what it has. */
#define USE(f) do { if (calls->f) sys.f = calls->f; } while (0)
	USE(accept); USE(accept4); USE(listen); USE(read); USE(readv); USE(recv);
	USE(recvfrom); USE(recvmsg); USE(write); USE(writev); USE(send); USE(sendto);
	USE(sendmsg); USE(close); USE(shutdown); USE(fork); USE(epoll_ctl);
	USE(epoll_wait); USE(epoll_pwait); USE(poll); USE(ppoll); USE(select); USE(pselect);
	USE(clock_gettime);
	USE(gettimeofday); USE(time); USE(getrandom); USE(getentropy); USE(rand);
	USE(random); USE(drand48); USE(lrand48); USE(mrand48);
	USE(erand48); USE(nrand48); USE(jrand48); USE(rand_r); USE(arc4random);
	USE(arc4random_buf); USE(arc4random_uniform); USE(fopen); USE(fopen64); USE(open); USE(open64); USE(openat);
	USE(openat64); USE(__open_2); USE(__open64_2); USE(wait4);
#undef USE
}

int sys_random_bytes(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = sys.getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
