#include "real.h"

#include <dlfcn.h>
#include <pthread.h>

struct socket_calls real;
int real_resolved;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

#define RESOLVE(name) (real.name = (__typeof__(real.name))dlsym(RTLD_NEXT, #name))

static void resolve(void)
{
	RESOLVE(accept);
	RESOLVE(accept4);
	RESOLVE(listen);
	RESOLVE(read);
	RESOLVE(readv);
	RESOLVE(recv);
	RESOLVE(recvfrom);
	RESOLVE(recvmsg);
	RESOLVE(write);
	RESOLVE(writev);
	RESOLVE(send);
	RESOLVE(sendto);
	RESOLVE(sendmsg);
	RESOLVE(close);
	RESOLVE(shutdown);
	RESOLVE(fork);
	RESOLVE(epoll_ctl);
	RESOLVE(epoll_wait);
	RESOLVE(epoll_pwait);
	RESOLVE(poll);
	RESOLVE(ppoll);
	RESOLVE(select);
	RESOLVE(pselect);
	RESOLVE(clock_gettime);
	RESOLVE(gettimeofday);
	RESOLVE(time);
	RESOLVE(getrandom);
	RESOLVE(getentropy);
	RESOLVE(rand);
	RESOLVE(random);
	RESOLVE(drand48);
	RESOLVE(lrand48);
	RESOLVE(mrand48);
	RESOLVE(erand48);
	RESOLVE(nrand48);
	RESOLVE(jrand48);
	RESOLVE(rand_r);
	RESOLVE(arc4random);
	RESOLVE(arc4random_buf);
	RESOLVE(arc4random_uniform);
	RESOLVE(fopen);
	RESOLVE(fopen64);
	RESOLVE(open);
	RESOLVE(open64);
	RESOLVE(openat);
	RESOLVE(openat64);
	RESOLVE(__open_2);
	RESOLVE(__open64_2);
	RESOLVE(wait4);
	__atomic_store_n(&real_resolved, 1, __ATOMIC_RELEASE);
}

void real_resolve_slow(void)
{
	pthread_once(&resolve_once, resolve);
}
