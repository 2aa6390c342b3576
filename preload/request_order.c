/* thread_order = requests: requests of a multi-threaded server execute one
 * at a time, in log order, on every replica (doc/operator-guide.md,
 * "Multi-threaded servers").
 *
 * A request runs on the thread that read it, from the read that got its
 * input until the thread asks for input again: it waits for events
 * (epoll_wait), reads a replicated connection after writing to one (its
 * reply is out), reads another connection (an event loop handles one
 * at a time), or closes the request's connection.  A read of the same
 * connection that finds nothing (EAGAIN) before any reply ends nothing:
 * event loops read until EAGAIN, then handle what they read; nor does one
 * that gets more of its input.
 *
 * Leader: the request token.  A thread takes it before a read of a client
 * and keeps it until its request ends, so the reads that get input (and so
 * the log's RECV entries) and the requests they start come in one order.
 * A blocking read waits for its bytes before it takes the token: an idle
 * thread never holds the others up.  Backups: the head turn stays on the
 * turn a thread took until the request it started ends (turns.h,
 * replay_request_done), so requests run in the log's order there too.
 *
 * A request whose thread waits (not running: a lock wait inside the
 * server) for ORDER_STALL_NS lets the next one start beside it, logged:
 * the server must never wait for ever on an order it cannot keep.  A
 * thread that runs all along (a slow request, a loaded machine) keeps it. */
#define LOG_PREFIX "shim: "
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/futex.h"
#include "common/logger.h"
#include "common/thread_state.h"
#include "coordinator/node/turns.h"
#include "shim.h"

#define ORDER_STALL_NS (50 * 1000000ULL)
#define WAIT_SLICE_US 1000

/* The leader's token: the holder's thread id, 0 when free. */
static uint32_t token;
static uint32_t token_waiters;
/* Its holder waits inside the shim (a read's commit wait, a reply held
 * for commit), not in the server: it keeps the token. */
static uint32_t holder_in_shim;
static uint64_t steal_warn_ns;

/* This thread's part. */
static __thread int holding;	/* leader: the token */
static __thread int got_input;	/* its request read some input */
static __thread int wrote;	/* it wrote to a replicated connection since */
static __thread int token_fd;	/* leader: the client whose request holds it */

int request_order_on(void)
{
	return shim_node && node_config(shim_node)->thread_order == ORDER_REQUESTS;
}

static void token_release(void)
{
	uint32_t me = thread_id();

	holding = 0;
	got_input = 0;
	wrote = 0;
	/* The token may have been taken from us after a stall: then its
	 * words are the new holder's. */
	if (__atomic_load_n(&token, __ATOMIC_RELAXED) != me)
		return;
	__atomic_store_n(&holder_in_shim, 0, __ATOMIC_RELEASE);
	if (__atomic_compare_exchange_n(&token, &me, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&token_waiters, __ATOMIC_SEQ_CST))
		futex_wake_one(&token);
}

static void token_take(void)
{
	uint32_t seen = 0;	/* the holder we wait for, since SEEN_NS */
	uint64_t seen_ns = 0;

	uint32_t me = thread_id();

	for (;;) {
		uint32_t holder = 0;

		if (__atomic_compare_exchange_n(&token, &holder, me, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			break;
		uint64_t now = now_ns();
		if (holder != seen ||
		    (now - seen_ns >= ORDER_STALL_NS &&
		     (__atomic_load_n(&holder_in_shim, __ATOMIC_ACQUIRE) || thread_running(holder)))) {
			/* A new holder, or one that runs (slow, not waiting):
			 * the bound starts again. */
			seen = holder;
			seen_ns = now;
		} else if (now - seen_ns >= ORDER_STALL_NS &&
			   __atomic_compare_exchange_n(&token, &holder, me, 0, __ATOMIC_ACQUIRE,
						       __ATOMIC_RELAXED)) {
			node_order_stalled(shim_node);
			if (now - __atomic_load_n(&steal_warn_ns, __ATOMIC_RELAXED) > 10000000000ULL) {
				__atomic_store_n(&steal_warn_ns, now, __ATOMIC_RELAXED);
				pr_warn("a request on thread %u ran %llu ms without asking for input: "
					"the next one starts beside it (request order given up for it; "
					"logged once per 10 s)", holder,
					(unsigned long long)(ORDER_STALL_NS / 1000000));
			}
			break;
		}
		__atomic_add_fetch(&token_waiters, 1, __ATOMIC_SEQ_CST);
		futex_wait(&token, holder, WAIT_SLICE_US);
		__atomic_sub_fetch(&token_waiters, 1, __ATOMIC_SEQ_CST);
	}
	holding = 1;
	got_input = 0;
	wrote = 0;
}

void request_order_idle(void)
{
	if (!request_order_on())
		return;
	if (holding)
		token_release();
	if (node_replay(shim_node)) {
		wrote = 0;
		replay_request_done(node_replay(shim_node));
	}
}

void request_order_closed(int fd)
{
	/* The thread closes the client of its request: done with it. */
	if (holding && fd == token_fd)
		token_release();
}

void request_order_wrote(void)
{
	wrote = 1;
}

void request_order_shim_wait(int on)
{
	if (holding)
		__atomic_store_n(&holder_in_shim, (uint32_t)on, __ATOMIC_RELEASE);
}

void request_order_before_replay_read(void)
{
	if (request_order_on() && wrote) {
		wrote = 0;
		replay_request_done(node_replay(shim_node));
	}
}

void request_order_before_client_read(int fd, int flags)
{
	if (!request_order_on() || !node_serving(shim_node))
		return;
	if (holding && !wrote && fd == token_fd)
		return;		/* its request still reads its input */
	if (holding)
		token_release();	/* replied, or on to another client: done */
	if (shim_read_blocks(fd, flags)) {
		/* Idle until the client sends: without the token. */
		struct pollfd p = { fd, POLLIN, 0 };
		while (real.poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	}
	token_take();
	token_fd = fd;
	__atomic_store_n(&holder_in_shim, 1, __ATOMIC_RELEASE);
}

void request_order_after_client_read(ssize_t n)
{
	int e = errno;

	if (!holding)
		return;
	__atomic_store_n(&holder_in_shim, 0, __ATOMIC_RELEASE);
	if (n >= 0)
		got_input = 1;
	else if (!got_input)
		token_release();	/* nothing came: no request began */
	errno = e;
}
