/* The server's side of replay, called by the shim from the server's
 * threads (turns.h): claims of replay connections, the gate on their
 * reads, in-place reads and writes, and the server's sleep in epoll_wait. */
#define LOG_PREFIX "turns: "
#include "coordinator/node/turns.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/futex.h"
#include "coordinator/input/input_clock.h"
#include "common/logger.h"
#include "coordinator/node/replay_internal.h"
#include "common/thread_state.h"
#include "common/sys.h"

/* A read that is not its connection's turn, on a connection no epoll set
 * watches: how long a non-blocking one waits for the turn before EAGAIN,
 * and the slices a blocking one sleeps in. */
#define GATE_WAIT_NS (10 * 1000000ULL)
/* An accept of our connection whose arming is under way waits for it: in
 * slices, and at most long enough for a role thread preempted on a
 * loaded host (a refused replay connection would lose its input). */
#define CLAIM_WAIT_US 20
#define CLAIM_WAIT_MAX_US 5000000
#define GATE_SLICE_US 1000

/* thread_order = requests: the turn this thread took last, whose request
 * may still run (the head stays on it until the thread asks for input). */
static __thread struct replay *pending_r;
static __thread uint64_t pending_h;

/* Turn H (S) was taken whole by this thread. */
static void turn_complete(struct replay *r, struct turn *s, uint64_t h)
{
	if (r->n->cfg.thread_order != ORDER_REQUESTS) {
		sched_advance(r, h);
		return;
	}
	replay_request_done(r);
	s->done_ns = now_ns();
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	pending_r = r;
	pending_h = h;
}

void replay_request_done(struct replay *r)
{
	if (pending_r != r)
		return;
	pending_r = NULL;
	sched_advance(r, pending_h);	/* nothing if the role thread moved on */
}

/* This thread reads T while the turn it took last is still pending.  A
 * read of another connection ends that request (an event loop handles one
 * connection at a time).  A read of the same connection goes on with the
 * request when the next turn is T's too (a MySQL packet's header, then
 * its body: on the leader the token kept other reads from coming between
 * them); otherwise the request still runs and the read waits, unless the
 * thread keeps asking for 50 ms: then it waits for input, and
 * skip_dead_turns lets the next turn go. */
static void request_reads_on(struct replay *r, struct replay_tap *t)
{
	uint64_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), now;
	struct turn *mine;
	const struct turn *next;

	if (pending_r != r)
		return;
	mine = &r->sched[pending_h % SCHED_SIZE];
	if (pending_h != h || mine->tap != t) {
		replay_request_done(r);
		return;
	}
	if (h + 1 != __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE)) {
		next = &r->sched[(h + 1) % SCHED_SIZE];
		/* (Not a request the leader's server read only after it
		 * answered this one.) */
		if (next->tap == t && next->gen == t->gen &&
		    !__atomic_load_n(&next->after_answer, __ATOMIC_ACQUIRE)) {
			replay_request_done(r);
			return;
		}
	}
	/* Refused: an event loop reads until EAGAIN and then executes; a
	 * thread that keeps asking waits for more input (skip_dead_turns). */
	now = now_ns();
	if (!__atomic_load_n(&mine->asked_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&mine->asked_ns, now, __ATOMIC_RELAXED);
	__atomic_store_n(&mine->last_ask_ns, now, __ATOMIC_RELAXED);
}

struct replay_tap *replay_tap_claim(struct replay *r, int fd, const void *peer_sockaddr,
				    uint16_t peer_port)
{
	const struct sockaddr *pa = peer_sockaddr;
	struct replay_tap *t = &r->taps[peer_port];
	uint32_t armed = TAP_ARMED;

	/* Our replay sockets are bound to the server's own address. */
	if (pa->sa_family != r->app.ss_family)
		return NULL;
	if (pa->sa_family == AF_INET &&
	    ((const struct sockaddr_in *)pa)->sin_addr.s_addr !=
		    ((struct sockaddr_in *)&r->app)->sin_addr.s_addr)
		return NULL;
	if (pa->sa_family == AF_INET6 &&
	    memcmp(&((const struct sockaddr_in6 *)pa)->sin6_addr,
		   &((struct sockaddr_in6 *)&r->app)->sin6_addr, sizeof(struct in6_addr)))
		return NULL;
	/* Pairs with the release store of TAP_ARMED in tap_arm().  Our
	 * connect() may still be arming it: the kernel gave the port inside
	 * connect(), and on loopback the connection can be accepted before
	 * connect() returned.  The arming follows within microseconds. */
	for (int waited_us = 0;; waited_us += CLAIM_WAIT_US) {
		int connecting = __atomic_load_n(&r->connecting, __ATOMIC_ACQUIRE);

		armed = TAP_ARMED;
		if (__atomic_compare_exchange_n(&t->state, &armed, TAP_CLAIMED, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			break;
		/* Not one of ours (or it was dropped): a connection that was
		 * armed when `connecting` fell to 0 is claimed above. */
		if (!connecting || waited_us >= CLAIM_WAIT_MAX_US)
			return NULL;
		usleep(CLAIM_WAIT_US);
	}
	t->srv_fd = fd;
	return t;
}

size_t replay_gate(struct replay *r, struct replay_tap *t, size_t want)
{
	uint64_t free = __atomic_load_n(&t->free_bytes, __ATOMIC_ACQUIRE), h;
	struct turn *s;

	request_reads_on(r, t);
	if (free)
		return want < free ? want : (size_t)free;
	if (__atomic_load_n(&t->free_eof, __ATOMIC_ACQUIRE))
		return want;
	s = sched_head(r, &h);
	if (!s || s->tap != t || s->gen != t->gen || __atomic_load_n(&s->done, __ATOMIC_ACQUIRE) ||
	    turn_waits_answer(s))
		return 0;
	if (s->type == ENTRY_CLOSE)
		return want;
	if (s->data)
		return 0;	/* held here, none of it in the socket */
	if (s->stamp_ms)
		input_window_enter(s->stamp_ms, s->idx);	/* the bytes the server reads next are its */
	return want < s->remaining ? want : (size_t)s->remaining;
}

int replay_tap_ready(struct replay *r, struct replay_tap *t)
{
	const struct turn *s;
	uint64_t h;

	if (__atomic_load_n(&t->free_bytes, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&t->free_eof, __ATOMIC_ACQUIRE))
		return 1;
	/* The server closed it meanwhile, or this node leads now: the socket
	 * says what there is. */
	if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TAP_CLAIMED || node_serving(r->n))
		return 1;
	s = sched_head(r, &h);
	return s && s->tap == t && s->gen == t->gen && !__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) &&
	       !turn_waits_answer(s);
}

size_t replay_gate_wait(struct replay *r, struct replay_tap *t, size_t want, int blocking)
{
	uint64_t start = now_ns(), h;

	for (;;) {
		uint32_t seen = __atomic_load_n(&r->turn_bell, __ATOMIC_SEQ_CST);
		size_t cap = replay_gate(r, t, want);
		const struct turn *s;

		if (cap)
			return cap;
		s = sched_head(r, &h);
		if (s && s->tap == t && s->gen == t->gen && s->data &&
		    !__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) && !turn_waits_answer(s))
			return REPLAY_GATE_HELD;
		/* The server closed it meanwhile, or this node leads now: the
		 * socket says what there is. */
		if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TAP_CLAIMED ||
		    node_serving(r->n))
			return want;
		if (!blocking && now_ns() - start >= GATE_WAIT_NS)
			return 0;
		/* The head's connection is read by this very thread (a server
		 * that polls many): only it can take that turn, so no wait. */
		s = sched_head(r, &h);
		if (!blocking && s && __atomic_load_n(&s->tap->reader, __ATOMIC_RELAXED) == thread_id())
			return 0;
		/* The bell wakes us; the slice is a safety net. */
		bell_wait(&r->turn_bell, &r->turn_sleepers, seen,
			  blocking ? 100 * GATE_SLICE_US : GATE_SLICE_US);
	}
}

/* The server read input of T's connection, of turn S: it owes an answer
 * (replay_mid_requests), until it writes to T (replay_absorb).  The rest
 * of S no longer waits for one: a server that reads a turn in two parts
 * (its read buffer is smaller than the leader's read was) would
 * otherwise wait on itself. */
static void tap_heard(struct replay_tap *t, struct turn *s)
{
	__atomic_store_n(&s->after_answer, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&t->read_stamp_ms, s->stamp_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&t->unanswered, 1, __ATOMIC_RELEASE);
}

void replay_tap_read(struct replay *r, struct replay_tap *t, ssize_t n)
{
	uint64_t free = __atomic_load_n(&t->free_bytes, __ATOMIC_ACQUIRE), h;
	struct turn *s;

	__atomic_store_n(&t->reader, thread_id(), __ATOMIC_RELAXED);
	if (n > 0 && free) {
		uint64_t k = (uint64_t)n < free ? (uint64_t)n : free;
		__atomic_sub_fetch(&t->free_bytes, k, __ATOMIC_RELEASE);
		n -= (ssize_t)k;
		if (!n)
			return;
	}
	s = sched_head(r, &h);
	if (!s || s->tap != t || s->gen != t->gen || __atomic_load_n(&s->done, __ATOMIC_ACQUIRE))
		return;
	if (s->type == ENTRY_RECV && n > 0) {
		tap_heard(t, s);
		s->remaining -= (uint64_t)n < s->remaining ? (uint64_t)n : s->remaining;
		if (!s->remaining)
			turn_complete(r, s, h);
	} else if (s->type == ENTRY_CLOSE && n == 0) {
		turn_complete(r, s, h);
	}
}

void replay_tap_close(struct replay *r, struct replay_tap *t)
{
	/* A thread that closes the connection of its request is done with
	 * it (a thread per connection goes back to its pool, asking for no
	 * input anywhere). */
	if (pending_r == r && r->sched[pending_h % SCHED_SIZE].tap == t)
		replay_request_done(r);
	__atomic_store_n(&t->state, TAP_FREE, __ATOMIC_RELEASE);
	if (__atomic_load_n(&r->waiting, __ATOMIC_ACQUIRE))
		r->n->ops->wake(r->n->tp);
}

/* --- In-place reads (the server watches a replay connection with epoll) --- */

int replay_take(struct replay *r, struct replay_tap *t, const struct iovec *iov, int iovcnt,
		ssize_t *ret)
{
	uint64_t h;
	struct turn *s;
	size_t done;

	if (__atomic_load_n(&t->free_bytes, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&t->free_eof, __ATOMIC_ACQUIRE))
		return 0;
	request_reads_on(r, t);
	s = sched_head(r, &h);
	if (!s || s->tap != t || s->gen != t->gen || !s->data ||
	    __atomic_load_n(&s->done, __ATOMIC_ACQUIRE) || turn_waits_answer(s))
		return 0;
	pthread_mutex_lock(&r->take_lock);
	/* The backup thread may have skipped it meanwhile. */
	if (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) != h || !s->remaining) {
		pthread_mutex_unlock(&r->take_lock);
		return 0;
	}
	__atomic_store_n(&t->reader, thread_id(), __ATOMIC_RELAXED);
	done = iov_scatter(iov, iovcnt, s->data + (s->len - s->remaining), s->remaining);
	if (s->stamp_ms)
		input_window_enter(s->stamp_ms, s->idx);
	if (done)
		tap_heard(t, s);
	s->remaining -= done;
	__atomic_sub_fetch(&r->held, done, __ATOMIC_RELEASE);
	if (!s->remaining)
		turn_complete(r, s, h);
	pthread_mutex_unlock(&r->take_lock);
	*ret = (ssize_t)done;
	return 1;
}

/* --- A read, whatever its libc family --- */

ssize_t replay_read(struct replay *r, struct replay_tap *t, const struct iovec *iov, int iovcnt,
		    const struct replay_sock *sock)
{
	size_t want = iov_total(iov, iovcnt), cap;
	ssize_t n;

	/* A zero-length read returns 0 and consumes nothing: no turn. */
	if (!want)
		return sock->read(sock->arg, 0);
	for (;;) {
		if (replay_take(r, t, iov, iovcnt, &n))
			return n;
		cap = replay_gate(r, t, want);
		if (!cap && !sock->watched)
			cap = replay_gate_wait(r, t, want, sock->blocks(sock->arg));
		if (cap != REPLAY_GATE_HELD)
			break;	/* else the turn that came is held here: take it */
	}
	if (!cap) {
		errno = EAGAIN;
		return -1;
	}
	n = sock->read(sock->arg, cap);
	if (n >= 0)
		replay_tap_read(r, t, n);
	return n;
}

int replay_ready_fds(struct replay *r, int waker, int *fds, int cap)
{
	uint64_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	uint64_t t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	int n = 0;

	for (; h != t && n < cap; h++) {
		const struct turn *s = &r->sched[h % SCHED_SIZE];
		if (!s->data || s->gen != s->tap->gen || __atomic_load_n(&s->done, __ATOMIC_ACQUIRE) ||
		    turn_waits_answer(s) ||
		    __atomic_load_n(&s->tap->state, __ATOMIC_ACQUIRE) != TAP_CLAIMED ||
		    __atomic_load_n(&s->tap->waker, __ATOMIC_ACQUIRE) != (uint32_t)waker)
			break;
		for (int i = 0; i < n; i++)
			if (fds[i] == s->tap->srv_fd)
				return n;	/* its next turn waits for this one */
		fds[n++] = s->tap->srv_fd;
	}
	return n;
}

void replay_tap_watch(struct replay *r, struct replay_tap *t, int on, int waker)
{
	__atomic_store_n(&t->waker, (uint32_t)waker, __ATOMIC_RELEASE);
	__atomic_store_n(&t->watched, (uint32_t)!!on, __ATOMIC_RELEASE);
	if (!on)
		return;
	__atomic_store_n(&t->ever_watched, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&r->epoll_server, 1, __ATOMIC_RELEASE);
	/* Its turn may be held here already (replay.c, exec_recv): wake
	 * the set's thread for it. */
	replay_kick_head(r);
}

/* --- Wakers: which server thread to wake for the head turn --- */

int replay_waker_open(struct replay *r)
{
	int id = 0;

	pthread_mutex_lock(&r->waker_lock);
	for (int i = 1; i < WAKERS && !id; i++) {
		struct replay_waker *w = &r->wakers[i];
		if (w->taken)
			continue;
		if (w->fd < 0)
			w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (w->fd < 0) {
			pr_warn("no eventfd for an epoll set (%s): it shares the common waker",
				strerror(errno));
			break;
		}
		w->taken = 1;
		id = i;
	}
	if (!id && !r->waker_full_said) {
		r->waker_full_said = 1;
		pr_warn("more than %d epoll sets watch replay connections: the rest share one waker",
			WAKERS - 1);
	}
	pthread_mutex_unlock(&r->waker_lock);
	return id;
}

void replay_waker_close(struct replay *r, int waker)
{
	uint64_t v;

	if (waker <= 0 || waker >= WAKERS)
		return;
	pthread_mutex_lock(&r->waker_lock);
	/* Its eventfd stays open for the next set: a tap that still names
	 * this waker can at worst kick that set for nothing. */
	if (sys.read(r->wakers[waker].fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		pr_debug("eventfd: %s", strerror(errno));
	r->wakers[waker].taken = 0;
	pthread_mutex_unlock(&r->waker_lock);
}

int replay_waker_fd(struct replay *r, int waker)
{
	return r->wakers[waker].fd;
}

void replay_kick_head(struct replay *r)
{
	uint64_t h, one = 1;
	const struct turn *s;
	struct replay_waker *w;

	/* With replay_server_sleep(): we published the turn (or moved the
	 * head to it), then look for a sleeper with a read-modify-write of
	 * the word it increments before it looks for the turn: either it sees
	 * our turn, or we see it asleep. */
	bell_ring(&r->turn_bell, &r->turn_sleepers);
	s = sched_head(r, &h);
	if (!s || !s->data)
		return;
	w = &r->wakers[__atomic_load_n(&s->tap->waker, __ATOMIC_ACQUIRE) % WAKERS];
	if (__atomic_fetch_add(&w->sleepers, 0, __ATOMIC_SEQ_CST) &&
	    sys.write(w->fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		pr_debug("eventfd: %s", strerror(errno));
}

int replay_server_sleep(struct replay *r, int waker)
{
	struct replay_waker *w = &r->wakers[waker];
	int fd;

	__atomic_add_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	if (!replay_ready_fds(r, waker, &fd, 1))
		return 1;
	__atomic_sub_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	return 0;
}

void replay_server_awake(struct replay *r, int waker)
{
	struct replay_waker *w = &r->wakers[waker];
	uint64_t n;

	__atomic_sub_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	if (sys.read(w->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		pr_debug("eventfd: %s", strerror(errno));
}

int replay_absorb(struct replay *r, struct replay_tap *t, const struct iovec *iov, int iovcnt,
		  int check)
{
	struct rconn *c;

	/* Whatever it writes answers what it read (replay_mid_requests), and
	 * may let the head turn go (turn_waits_answer): its reader sleeps. */
	if (__atomic_load_n(&t->unanswered, __ATOMIC_RELAXED)) {
		uint64_t h;
		const struct turn *s;

		__atomic_store_n(&t->unanswered, 0, __ATOMIC_RELEASE);
		s = sched_head(r, &h);
		if (s && s->tap == t && s->after_answer)
			replay_kick_head(r);
	}
	if (!r->n->cfg.replay_in_place)
		return 0;
	pthread_mutex_lock(&r->out_lock);
	c = t->conn;
	if (!c || __atomic_load_n(&c->dead, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TAP_CLAIMED) {
		pthread_mutex_unlock(&r->out_lock);
		return 0;
	}
	for (int i = 0; i < iovcnt && check && r->n->cfg.checker; i++)
		out_check_absorb(&c->chk, iov[i].iov_base, iov[i].iov_len);
	pthread_mutex_unlock(&r->out_lock);
	return 1;
}

int replay_tap_conn(struct replay *r, struct replay_tap *t, struct viewstamp *vs)
{
	int live;

	pthread_mutex_lock(&r->out_lock);
	live = t->conn && !__atomic_load_n(&t->conn->dead, __ATOMIC_RELAXED);
	if (live)
		*vs = t->conn->vs;
	pthread_mutex_unlock(&r->out_lock);
	return live;
}
