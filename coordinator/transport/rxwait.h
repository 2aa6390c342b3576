/* How the transports whose writes land only while a thread of ours
 * receives them (tcp, rdma) wait.  One thread at a time holds RX and blocks
 * in the OS (epoll, a completion channel); the others sleep on the doorbell
 * futex.  The receiver rings the doorbell when it applied something, and
 * when it leaves while others sleep: the receiving is theirs then.  An
 * eventfd in the receiver's wait set lets wake() cut its block short.
 *
 * The including file defines LOG_PREFIX first (logger.h). */
#ifndef APUS_RXWAIT_H
#define APUS_RXWAIT_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/futex.h"
#include "common/logger.h"
#include "coordinator/storage/region_wire.h"
#include "common/sys.h"

/* Called once a non-blocking poll found nothing and the bell is still
 * SEEN.  BLOCK runs with RX held, blocks at most TIMEOUT_US and returns
 * how many writes (or events) it handled. */
static inline void rx_wait(pthread_mutex_t *rx, struct region_ctl *c, uint32_t seen, int timeout_us,
			   int (*block)(void *arg, int timeout_us), void *arg)
{
	int handled;

	if (pthread_mutex_trylock(rx)) {
		/* Another thread receives: sleep until it rings. */
		bell_wait(&c->bell, &c->sleepers, seen, timeout_us);
		return;
	}
	handled = block(arg, timeout_us);
	pthread_mutex_unlock(rx);
	if (handled || __atomic_load_n(&c->sleepers, __ATOMIC_SEQ_CST))
		bell_ring(&c->bell, &c->sleepers);
}

/* Makes the receiver blocked on EVFD return (it holds RX meanwhile). */
static inline void rx_kick(int evfd)
{
	uint64_t one = 1;

	if (sys.write(evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		pr_debug("eventfd: %s", strerror(errno));
}

/* wake(): local sleepers and the blocked receiver alike. */
static inline void rx_wake(struct region_ctl *c, int evfd)
{
	bell_ring(&c->bell, &c->sleepers);
	rx_kick(evfd);
}

/* Clears EVFD once the receiver has woken. */
static inline void rx_drain(int evfd)
{
	uint64_t n;

	if (sys.read(evfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		pr_debug("eventfd: %s", strerror(errno));
}

#endif
