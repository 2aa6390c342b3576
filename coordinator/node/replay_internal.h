/* Replay's state, shared by its two sides: the role thread's (replay.c:
 * connections, the schedule's tail, housekeeping) and the server's
 * (turns.c: the shim takes turns at the schedule's head).  Only those two
 * files include it. */
#ifndef APUS_REPLAY_INTERNAL_H
#define APUS_REPLAY_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "checker/outcheck.h"
#include "coordinator/storage/entry.h"
#include "coordinator/node/node_internal.h"

#define SCHED_SIZE 8192
#define NBUCKETS 4096
/* Wakers, one per epoll set of the server's that watches replay
 * connections (0 is shared by the sets beyond the rest). */
#define WAKERS 64

enum tap_state { TAP_FREE = 0, TAP_ARMED, TAP_CLAIMED };

/* The server's side of one replay connection. */
struct replay_tap {
	uint32_t state;
	int32_t srv_fd;
	uint64_t free_bytes;	/* bytes it may read out of turn (their turn was skipped) */
	uint32_t free_eof;	/* its end of stream may be read out of turn */
	uint32_t gen;		/* bumped each time the tap is armed for a new connection */
	uint32_t watched;	/* the server watches it with epoll: bytes may stay with us */
	uint32_t ever_watched;	/* ... did so since this connection opened */
	uint32_t waker;		/* the waker of the set that watches it (turns.h) */
	uint32_t reader;	/* the server thread that read it last */
	int32_t ours;		/* our end of the connection */
	/* The server read input of it and has written nothing to it since:
	 * a request it has not answered, or the first part of one it still
	 * waits to read the rest of (replay_mid_requests).  And the input
	 * clock stamp of that read's entry. */
	uint32_t unanswered;
	uint64_t read_stamp_ms;
	struct rconn *conn;	/* its connection, for the server's output (out_lock) */
};

/* One turn of the schedule: the server is to read REMAINING more bytes
 * (ENTRY_RECV) or the end of stream (ENTRY_CLOSE) from TAP. */
struct turn {
	struct replay_tap *tap;
	uint64_t remaining;
	uint32_t type;
	uint32_t gen;		/* the tap's generation: turns of an older connection are void */
	char *data;		/* the bytes, held here for the server (NULL: in the socket) */
	uint64_t len;
	uint64_t stamp_ms;	/* its entry's input clock (input_clock.h) */
	uint64_t idx;		/* its entry, the key of the server's random draws */
	/* ENTRY_F_ANSWERED: not for the server while its tap is unanswered
	 * (turn_waits_answer); cleared once the server read part of it: the
	 * rest is the same read of the leader's, answered or not. */
	uint32_t after_answer;
	/* thread_order = requests: taken whole, but the thread that took it
	 * has not asked for input since (its request runs); the head stays. */
	uint32_t done;
	uint64_t done_ns;
	/* ... and its thread read the connection again and was refused
	 * (its turn was all it had): first and last time.  A thread that
	 * keeps asking waits for input, it does not execute. */
	uint64_t asked_ns, last_ask_ns;
};

/* Turn S is the leader's input after an answer (ENTRY_F_ANSWERED) and
 * our server has not answered its connection yet: S waits. */
static inline int turn_waits_answer(const struct turn *s)
{
	return __atomic_load_n(&s->after_answer, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&s->tap->unanswered, __ATOMIC_ACQUIRE);
}

struct rconn {
	struct viewstamp vs;
	struct replay *r;
	int sock;
	int dead;		/* no socket, or the server dropped it: skip its entries */
	int eof;		/* we read the end of the server's output */
	int watched;		/* its socket is in the replay's epoll set */
	struct replay_tap *tap;
	uint64_t last_turn;	/* closing: the schedule's tail after its last turn */
	uint64_t closed_ns;	/* when the server had taken them all (0: not yet) */
	struct rconn *next;	/* hash chain, then the closing list */
	struct out_check chk;	/* the server's output against the leader's */
	char *prelude;		/* open before our point: its session, to send first */
	size_t prelude_len;
};

struct replay {
	struct node *n;
	struct sockaddr_storage app;	/* the local server's application address */
	socklen_t app_len;
	int epfd;
	int watched;		/* sockets in epfd (the backup thread only): none, no drain */
	struct replay_tap *taps;	/* indexed by our local port */
	struct rconn *buckets[NBUCKETS];
	struct rconn *closing;

	/* The schedule: the backup thread appends at tail; the server's
	 * threads take turns at head (CAS), the backup thread skips stalled ones. */
	struct turn sched[SCHED_SIZE];
	uint64_t head, tail;
	uint64_t close_tail;	/* the tail after the newest CLOSE turn */
	uint64_t stall_head, stall_since;
	uint64_t order_warn_ns;	/* when a request past ORDER_STALL_NS was last logged */
	uint32_t waiting;	/* the backup thread waits for the server to take turns */
	uint32_t epoll_server;	/* the server watches its connections with epoll */
	uint64_t held;		/* bytes of turns held here, not yet read */
	pthread_mutex_t take_lock;	/* an in-place read against a stalled turn's release */
	/* A server thread blocked in epoll_wait on a set is woken through
	 * that set's waker, when the head turn is one of the set's. */
	struct replay_waker {
		int fd;			/* an eventfd in the set: readable when kicked */
		uint32_t sleepers;	/* server threads blocked on the set */
		uint32_t taken;
	} wakers[WAKERS];
	pthread_mutex_t waker_lock;	/* taking and giving back wakers */
	/* Rung at every move of the head and every new turn: server threads
	 * whose read of a replay connection waits for its turn (not watched
	 * by epoll: replay_gate_wait) sleep on it. */
	uint32_t turn_bell, turn_sleepers;
	int waker_full_said;
	/* The output check of a connection, fed by the server's own writes
	 * (replay_absorb) as well as by the backup thread. */
	pthread_mutex_t out_lock;

	/* The sessions of our recovery point (at entry sessions_idx). */
	struct sessions *sessions;
	uint64_t sessions_idx;

	/* The entry in progress. */
	uint64_t cur_idx;
	uint64_t cur_stamp;	/* its input clock stamp, expanded (input_clock.h) */
	uint32_t cur_flags;	/* its ENTRY_F_* */
	uint64_t started_ns;
	uint64_t seen_off, progress_ns;	/* CLOSE: our server's output progress */
	int phase;
	size_t sent_off;

	uint64_t port_warn_ns;	/* when we last said no local port was free */
	/* A replay socket is connecting, its tap not armed yet (its port
	 * is known only once connect() returned): an accept waits for it. */
	uint32_t connecting;
	char divergence_path[PATH_MAX];
	char drain_buf[64 * 1024];
};

/* The turn at the head, or NULL when the schedule is empty. */
static inline struct turn *sched_head(struct replay *r, uint64_t *h)
{
	*h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	if (*h == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE))
		return NULL;
	return &r->sched[*h % SCHED_SIZE];
}

/* Wakes the server thread that sleeps on the set of the head turn's
 * connection, if the turn is held here (a turn in the socket wakes the
 * server by itself).  Pairs with replay_server_sleep(): either the sleeper
 * sees the turn, or we see the sleeper. */
void replay_kick_head(struct replay *r);

/* Moves the head past turn H unless another thread did, wakes the set
 * whose turn is next and the role thread when it waits for the server to
 * take turns. */
static inline void sched_advance(struct replay *r, uint64_t h)
{
	if (!__atomic_compare_exchange_n(&r->head, &h, h + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	replay_kick_head(r);
	if (__atomic_load_n(&r->waiting, __ATOMIC_ACQUIRE))
		r->n->ops->wake(r->n->tp);
}

#endif
