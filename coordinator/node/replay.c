#define LOG_PREFIX "replay: "
#include "coordinator/node/replay.h"
#include "common/thread_state.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <pthread.h>
#include <unistd.h>

#include "checker/divergence.h"
#include "checker/outcheck.h"
#include "coordinator/storage/checks.h"
#include "coordinator/node/input_child.h"
#include "coordinator/input/input_clock.h"
#include "common/logger.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/node/replay_internal.h"
#include "coordinator/storage/sessions.h"
#include "common/sys.h"

/* How long the server may leave its turn untaken before we skip it: a
 * server that stopped reading one client (Redis never does) must not stall
 * replay for ever.  Skipping lets that client's bytes be read out of turn,
 * which may break determinism, so it is long and it is logged.  It must
 * exceed any scheduling pause a loaded machine inflicts on the server. */
#define STALL_NS (10000 * 1000000ULL)
/* How long a replayed connection we closed waits for the server to drop its end. */
#define LINGER_NS (10000 * 1000000ULL)
/* thread_order = requests: how long one request may wait (its thread not
 * running) before the next turn is let go beside it. */
#define ORDER_STALL_NS (50 * 1000000ULL)
/* How long a CLOSE waits for our server's output to reach the leader's. */
#define CLOSE_WAIT_NS (2000 * 1000000ULL)
#define CLOSE_IDLE_NS (50 * 1000000ULL)	/* ... while it keeps writing */
/* Bytes held for the server's in-place reads at most (then we wait for it,
 * as we wait when its socket is full). */
#define HELD_MAX (8 << 20)

struct replay *replay_new(struct node *n)
{
	const struct node_conf *nc = &n->cfg.nodes[n->self];
	struct replay *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->n = n;
	r->stall_head = UINT64_MAX;	/* no turn has been watched yet */
	config_node_path(&n->cfg, n->self, DIVERGENCE_FILE, r->divergence_path,
			 sizeof(r->divergence_path));
	r->taps = calloc(65536, sizeof(*r->taps));
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < WAKERS; i++)
		r->wakers[i].fd = -1;
	r->wakers[0].fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r->wakers[0].taken = 1;
	pthread_mutex_init(&r->take_lock, NULL);
	pthread_mutex_init(&r->out_lock, NULL);
	pthread_mutex_init(&r->waker_lock, NULL);
	if (!r->taps || r->epfd < 0 || r->wakers[0].fd < 0)
		goto fail;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&r->app;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&r->app;
	if (inet_pton(AF_INET, nc->address, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)nc->app_port);
		r->app_len = sizeof(*a4);
	} else if (inet_pton(AF_INET6, nc->address, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)nc->app_port);
		r->app_len = sizeof(*a6);
	} else {
		pr_err("node address '%s' is not a numeric IP address", nc->address);
		goto fail;
	}
	return r;
fail:
	if (r->epfd >= 0)
		sys.close(r->epfd);
	if (r->wakers[0].fd >= 0)
		sys.close(r->wakers[0].fd);
	free(r->taps);
	free(r);
	return NULL;
}

/* --- The schedule --- */

static int sched_full(struct replay *r)
{
	return r->tail - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) >= SCHED_SIZE;
}

static void sched_push(struct replay *r, struct replay_tap *t, uint32_t type, uint64_t len,
		       char *data)
{
	struct turn *s = &r->sched[r->tail % SCHED_SIZE];

	free(s->data);		/* an earlier turn's, long taken or skipped */
	s->tap = t;
	s->remaining = len;
	s->type = type;
	s->gen = t->gen;
	s->data = data;
	s->len = len;
	s->stamp_ms = r->cur_stamp;
	s->idx = r->cur_idx;
	s->after_answer = !!(r->cur_flags & ENTRY_F_ANSWERED);
	s->done = 0;
	s->asked_ns = s->last_ask_ns = 0;
	/* Pairs with the acquire loads of tail in replay_gate(). */
	__atomic_store_n(&r->tail, r->tail + 1, __ATOMIC_RELEASE);
	replay_kick_head(r);
}

/* --- Connections --- */

static struct rconn *conn_find(struct replay *r, uint64_t idx)
{
	for (struct rconn *c = r->buckets[idx % NBUCKETS]; c; c = c->next)
		if (c->vs.idx == idx)
			return c;
	return NULL;
}

/* A connection still open or already closed but lingering. */
static struct rconn *conn_find_any(struct replay *r, uint64_t idx)
{
	struct rconn *c = conn_find(r, idx);

	for (struct rconn *l = r->closing; !c && l; l = l->next)
		if (l->vs.idx == idx)
			c = l;
	return c;
}

static void on_diverge(void *arg, uint64_t offset, uint64_t leader_crc, uint64_t replica_crc,
		       uint64_t index, const char *why, const void *excerpt, size_t len)
{
	struct rconn *c = arg;
	struct node *n = c->r->n;
	struct timespec ts;
	struct divergence d = { .node = n->self, .conn_view = c->vs.view, .conn_idx = c->vs.idx,
				.offset = offset, .leader_crc = leader_crc,
				.replica_crc = replica_crc, .index = index, .why = why,
				.excerpt = excerpt, .excerpt_len = len };
	int rc;

	sys.clock_gettime(CLOCK_REALTIME, &ts);
	d.time_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	rc = divergence_append(c->r->divergence_path, &d);
	if (rc)
		pr_err("cannot record a divergence in %s: %s", c->r->divergence_path, strerror(-rc));
	n->status->divergences++;
	if (n->cfg.divergence == DIVERGENCE_UNHEALTHY)
		n->status->unhealthy = 1;
	pr_warn("output of connection %llu.%llu differs from the leader's at byte %llu (%s)",
		(unsigned long long)c->vs.view, (unsigned long long)c->vs.idx,
		(unsigned long long)offset, why);
}

/* C's socket leaves the epoll set (deleted, or closed). */
static void unwatch(struct replay *r, struct rconn *c)
{
	if (c->watched) {
		c->watched = 0;
		r->watched--;
	}
}

/* Reads what the server wrote on C, feeding the output check; with
 * UNTIL_EMPTY, until the socket says it is empty, else until a short read
 * (epoll reports the rest: one call per reply instead of two). */
static void conn_drain(struct replay *r, struct rconn *c, int until_empty)
{
	for (;;) {
		ssize_t k = sys.recv(c->sock, r->drain_buf, sizeof(r->drain_buf), MSG_DONTWAIT);

		if (k > 0) {
			if (r->n->cfg.checker) {
				pthread_mutex_lock(&r->out_lock);
				out_check_absorb(&c->chk, r->drain_buf, (size_t)k);
				pthread_mutex_unlock(&r->out_lock);
			}
			if (!until_empty && (size_t)k < sizeof(r->drain_buf))
				return;
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* End of stream or error: nothing more will come. */
		if (c->tap && __atomic_load_n(&c->tap->state, __ATOMIC_ACQUIRE) == TAP_ARMED)
			pr_warn("connection %llu.%llu: ended (%s) before the server accepted it",
				(unsigned long long)c->vs.view, (unsigned long long)c->vs.idx,
				k < 0 ? strerror(errno) : "end of stream");
		c->eof = 1;
		sys.epoll_ctl(r->epfd, EPOLL_CTL_DEL, c->sock, NULL);
		unwatch(r, c);
		return;
	}
}

static void conn_unhash(struct replay *r, struct rconn *c)
{
	struct rconn **pp = &r->buckets[c->vs.idx % NBUCKETS];

	while (*pp != c)
		pp = &(*pp)->next;
	*pp = c->next;
}

static void conn_free(struct replay *r, struct rconn *c)
{
	if (c->sock >= 0 && !c->eof && !c->dead)
		conn_drain(r, c, 1);
	pthread_mutex_lock(&r->out_lock);
	if (c->tap && c->tap->conn == c)
		c->tap->conn = NULL;	/* its later writes go to the closed socket */
	/* Only a complete output can be held against the leader's whole one. */
	if (c->eof && r->n->cfg.checker)
		out_check_finish(&c->chk);
	if (r->n->cfg.checker)
		checks_record(r->n->ctl, c->vs.view, c->vs.idx, &c->chk, c->eof);
	pthread_mutex_unlock(&r->out_lock);
	if (c->sock >= 0)
		sys.close(c->sock);
	unwatch(r, c);
	free(c->prelude);
	free(c);
}

/* Arms T for connection C from our socket S: the server's accept of it
 * claims T from here on (replay_tap_claim). */
static void tap_arm(struct replay *r, struct replay_tap *t, int s, struct rconn *c)
{
	t->srv_fd = -1;
	t->ours = s;
	t->watched = 0;
	t->ever_watched = 0;
	t->waker = 0;
	/* Before the server can accept and write (a greeting): its writes
	 * must find the check in place.  Sent through the socket instead,
	 * they would reach the check only when we drain it, after the
	 * writes that followed them in place. */
	pthread_mutex_lock(&r->out_lock);
	t->conn = c;
	pthread_mutex_unlock(&r->out_lock);
	t->gen++;
	t->unanswered = 0;
	t->free_bytes = 0;
	t->free_eof = 0;
	/* Pairs with the CAS in replay_tap_claim(). */
	__atomic_store_n(&t->state, TAP_ARMED, __ATOMIC_RELEASE);
}

static uint16_t port_of(const struct sockaddr_storage *a)
{
	return ntohs(a->ss_family == AF_INET ? ((const struct sockaddr_in *)a)->sin_port
					     : ((const struct sockaddr_in6 *)a)->sin6_port);
}

/* Connects a socket from the server's own address to the server for C,
 * its tap armed (*TAPP).  Returns the socket, or -errno: -EAGAIN when
 * the port the kernel gave is still another connection's (try again).
 *
 * The kernel picks the port at connect(): bind() to port 0 searches the
 * range for a port nobody holds, ~2-8 ms a call once TIME_WAIT crowds it
 * (our own replay connections leave theirs: we end them first), where
 * connect() takes any port whose four-tuple is free, ~30 us.  The port is
 * known only once connect() returned, and on loopback the server may
 * accept before that: replay_tap_claim() waits for the arming meanwhile
 * (r->connecting). */
static int open_replay_socket(struct replay *r, struct rconn *c, struct replay_tap **tapp)
{
	struct sockaddr_storage local = r->app;
	socklen_t len = r->app_len;
	int one = 1, s, e;
	struct replay_tap *t;

	s = socket(r->app.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (local.ss_family == AF_INET)
		((struct sockaddr_in *)&local)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&local)->sin6_port = 0;
	/* From the server's own address (replay_tap_claim looks for it); the
	 * port is left to connect(). */
	setsockopt(s, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	__atomic_add_fetch(&r->connecting, 1, __ATOMIC_ACQ_REL);
	if (bind(s, (struct sockaddr *)&local, len) < 0 ||
	    (connect(s, (struct sockaddr *)&r->app, r->app_len) < 0 && errno != EINPROGRESS) ||
	    getsockname(s, (struct sockaddr *)&local, &len) < 0) {
		e = -errno;
		goto fail;
	}
	t = &r->taps[port_of(&local)];
	/* The server still holds an earlier connection from this port, or
	 * may still accept one it never took (ours ended, the four-tuple is
	 * free): this one it could not tell apart; drop it (its accept is
	 * refused) and take another. */
	if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TAP_FREE) {
		e = -EAGAIN;
		goto fail;
	}
	tap_arm(r, t, s, c);
	__atomic_sub_fetch(&r->connecting, 1, __ATOMIC_ACQ_REL);
	*tapp = t;
	return s;
fail:
	__atomic_sub_fetch(&r->connecting, 1, __ATOMIC_ACQ_REL);
	sys.close(s);
	return e;
}

/* Opens our connection to the server for the client connection the
 * leader accepted as (VIEW, IDX).  0: no local port is free yet, try
 * again; 1: done (*OUT may be dead: no socket, or no server). */
static int conn_open(struct replay *r, uint64_t view, uint64_t idx, struct rconn **out)
{
	struct replay_tap *tap = NULL;
	struct rconn *c = calloc(1, sizeof(*c));
	int s;

	*out = NULL;
	if (!c) {
		pr_err("out of memory for connection %llu", (unsigned long long)idx);
		return 1;
	}
	c->vs = (struct viewstamp){ view, idx };
	c->r = r;
	out_check_init(&c->chk, on_diverge, c);
	s = open_replay_socket(r, c, &tap);
	/* Every four-tuple to the server is taken (TIME_WAIT of many short
	 * connections on this address): they free within a minute.  Wait
	 * for one: dropping the connection would drop its writes. */
	if (s == -EADDRINUSE || s == -EADDRNOTAVAIL || s == -EAGAIN) {
		uint64_t now = now_ns();

		free(c);
		if (s != -EAGAIN && now - r->port_warn_ns > 1000000000ULL) {
			r->port_warn_ns = now;
			pr_warn("connection %llu: no free local port to replay it from; waiting",
				(unsigned long long)idx);
		}
		return 0;
	}
	*out = c;
	c->sock = s;
	c->tap = tap;
	c->next = r->buckets[idx % NBUCKETS];
	r->buckets[idx % NBUCKETS] = c;
	if (s < 0) {
		errno = -s;
		pr_perror("connection %llu: cannot connect to the local server",
			  (unsigned long long)idx);
		c->dead = 1;
		return 1;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	if (sys.epoll_ctl(r->epfd, EPOLL_CTL_ADD, s, &ev) == 0) {
		c->watched = 1;
		r->watched++;
	}
	return 1;
}

/* A connection opens only once the server has taken the CLOSE turns
 * before it: the server then holds no more connections at once than the
 * leader's did.  A server far behind (a new leader catching up, a restart)
 * would otherwise get every connection of its backlog at once and refuse
 * those past its limit (mariadbd's max_connections), dropping their input. */
static int exec_accept(struct replay *r, const struct entry_hdr *e)
{
	struct rconn *c;

	if (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) < r->close_tail)
		return 0;
	return conn_open(r, e->view, e->idx, &c);
}

/* The sessions of the recovery point our server started from. */
static const struct sessions *point_sessions(struct replay *r)
{
	uint64_t at = r->n->exec.seed_idx;

	if (!r->sessions || r->sessions_idx != at) {
		sessions_free(r->sessions);
		r->sessions = sessions_load(&r->n->cfg, r->n->self, at);
		r->sessions_idx = at;
	}
	return r->sessions;
}

/* Input for a client connection the leader accepted before the entry our
 * server's snapshot stands at (a restart, apus rebuild): the snapshot
 * holds the server's data, not its connections, so the input goes
 * through a connection of our own, opened now, after the prelude that
 * gives it the session the point recorded (sessions.h: a SELECT).  Half a
 * request or an open MULTI never spans a point (snapshot.c).  Its output
 * cannot be checked against the leader's (the offsets differ), so it is
 * not. */
static int adopt(struct replay *r, const struct entry_hdr *e, struct rconn **out)
{
	struct viewstamp vs = { e->conn_view, e->conn_idx };
	const char *prelude;
	size_t len = 0;

	if (!conn_open(r, e->conn_view, e->conn_idx, out))
		return 0;
	if (!*out)
		return 1;
	(*out)->chk.diverged = 1;	/* never reports */
	prelude = point_sessions(r) ? sessions_prelude(r->sessions, vs, &len) : NULL;
	if (prelude && ((*out)->prelude = malloc(len))) {
		memcpy((*out)->prelude, prelude, len);
		(*out)->prelude_len = len;
	}
	pr_info("connection %llu.%llu, open before our snapshot (entry %llu): replaying its "
		"input on a connection of our own%s", (unsigned long long)e->conn_view,
		(unsigned long long)e->conn_idx, (unsigned long long)r->n->exec.seed_idx,
		(*out)->prelude ? ", given its session first" : "");
	return 1;
}

static int recv_bytes(struct replay *r, struct rconn *c, const char *data, size_t len,
		      uint64_t idx);

static int exec_recv(struct replay *r, const struct entry_hdr *e)
{
	struct rconn *c = conn_find(r, e->conn_idx);

	if (!c && e->conn_idx <= r->n->exec.seed_idx && !conn_find_any(r, e->conn_idx) &&
	    !adopt(r, e, &c))
		return 0;
	if (!c || c->dead || !e->data_sz)
		return 1;
	if (c->prelude) {
		/* A turn of its own, before the entry's; it waits for no
		 * answer (the connection is new to our server). */
		uint32_t flags = r->cur_flags;
		int done;

		r->cur_flags &= ~(uint32_t)ENTRY_F_ANSWERED;
		done = recv_bytes(r, c, c->prelude, c->prelude_len, e->idx);
		r->cur_flags = flags;
		if (!done)
			return 0;
		free(c->prelude);
		c->prelude = NULL;
		r->phase = 0;
		r->sent_off = 0;
		if (c->dead)
			return 1;
	}
	return recv_bytes(r, c, entry_data(e), e->data_sz, e->idx);
}

/* Delivers LEN bytes of entry IDX to C's server: 1 when done, 0 to be
 * called again (r->phase and r->sent_off say how far it got). */
static int recv_bytes(struct replay *r, struct rconn *c, const char *data, size_t len,
		      uint64_t idx)
{
	if (r->phase == 0) {
		if (sched_full(r))
			return 0;
		/* The server watches the connection with epoll: its shim reads
		 * the bytes from here (no socket on the way) and tells it when.
		 * Also a connection it has not accepted or watched yet, when it
		 * watches its connections with epoll (a restart, a new leader,
		 * or just a fast log: the input comes right after the ACCEPT):
		 * in the socket, bytes of a later turn would make the thread
		 * that will watch it spin in epoll_wait until their turn. */
		uint32_t st = __atomic_load_n(&c->tap->state, __ATOMIC_ACQUIRE);
		if ((st == TAP_CLAIMED && __atomic_load_n(&c->tap->watched, __ATOMIC_ACQUIRE)) ||
		    (st != TAP_FREE && __atomic_load_n(&r->epoll_server, __ATOMIC_ACQUIRE) &&
		     !__atomic_load_n(&c->tap->ever_watched, __ATOMIC_ACQUIRE))) {
			uint64_t held = __atomic_load_n(&r->held, __ATOMIC_ACQUIRE);
			char *copy;
			if (held && held + len > HELD_MAX)
				return 0;	/* the server is behind: come back */
			if ((copy = malloc(len))) {
				memcpy(copy, data, len);
				__atomic_add_fetch(&r->held, len, __ATOMIC_RELEASE);
				sched_push(r, c->tap, ENTRY_RECV, len, copy);
				return 1;
			}
		}
		/* The turn goes in before the bytes, so the server never finds
		 * bytes it may not account for. */
		sched_push(r, c->tap, ENTRY_RECV, len, NULL);
		r->phase = 1;
	}
	while (r->sent_off < len) {
		ssize_t k = sys.send(c->sock, data + r->sent_off, len - r->sent_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k > 0) {
			r->sent_off += (size_t)k;
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;	/* the server is behind: come back */
		pr_warn("connection %llu.%llu: the server dropped it (%s): its input from entry %llu on "
			"is not replayed", (unsigned long long)c->vs.view, (unsigned long long)c->vs.idx,
			k < 0 ? strerror(errno) : "no progress", (unsigned long long)idx);
		c->dead = 1;
		return 1;
	}
	return 1;
}

/* How much our server wrote on C so far. */
static uint64_t out_off(struct replay *r, struct rconn *c)
{
	uint64_t off;

	pthread_mutex_lock(&r->out_lock);
	off = c->chk.out.off;
	pthread_mutex_unlock(&r->out_lock);
	return off;
}

/* C's CLOSE is replayed (its turn, if any, is the schedule's newest): it
 * lingers on the closing list until the server dropped its end. */
static void conn_closing(struct replay *r, struct rconn *c)
{
	conn_unhash(r, c);
	c->last_turn = r->tail;
	c->closed_ns = 0;
	c->next = r->closing;
	r->closing = c;
}

static int exec_close(struct replay *r, const struct entry_hdr *e)
{
	struct rconn *c = conn_find(r, e->conn_idx);

	if (!c)
		return 1;
	if (e->data_sz == sizeof(struct out_record)) {
		const struct out_record *last = entry_data(e);
		pthread_mutex_lock(&r->out_lock);
		out_check_leader_final(&c->chk, last->offset, last->crc, e->idx);
		pthread_mutex_unlock(&r->out_lock);
		/* The leader's client hung up only after the leader's server wrote
		 * all this; hanging up earlier would make our server drop the rest
		 * of a long reply.  So wait until ours wrote as much (bounded). */
		if (!c->dead && !c->eof && out_off(r, c) < last->offset) {
			uint64_t now = now_ns(), off;

			conn_drain(r, c, 1);
			off = out_off(r, c);
			if (off != r->seen_off) {	/* still writing */
				r->seen_off = off;
				r->progress_ns = now;
			}
			/* A shorter output that stopped growing is a divergence, not
			 * a reply in progress: do not stall replay for it. */
			if (off < last->offset && now - r->progress_ns < CLOSE_IDLE_NS &&
			    now - r->started_ns < CLOSE_WAIT_NS)
				return 0;
		}
	}
	if (!c->dead) {
		if (sched_full(r))
			return 0;
		sched_push(r, c->tap, ENTRY_CLOSE, 0, NULL);
		r->close_tail = r->tail;
		sys.shutdown(c->sock, SHUT_WR);
	}
	/* Keep our end until the server dropped its own: closing it now could
	 * reset the connection before the server read everything. */
	conn_closing(r, c);
	return 1;
}

int replay_open_conns(struct replay *r)
{
	int open = 0;

	/* Dropped ones too: the leader's server may still hold their session. */
	for (int b = 0; b < NBUCKETS; b++)
		for (struct rconn *c = r->buckets[b]; c; c = c->next)
			open++;
	return open;
}

int replay_unaccepted(struct replay *r)
{
	int n = 0;

	for (int b = 0; b < NBUCKETS; b++)
		for (struct rconn *c = r->buckets[b]; c; c = c->next)
			if (!c->dead && c->tap &&
			    __atomic_load_n(&c->tap->state, __ATOMIC_ACQUIRE) == TAP_ARMED)
				n++;
	return n;
}

/* A request reaches a server in several reads when it is larger than its
 * read buffer (Redis: 16 kB), or a client sends it in parts: a read whose
 * connection the server has not answered within this much of the log's
 * clock is taken for a request that waits (a blocking command, a
 * pipeline with no replies) rather than for the first part of one. */
#define MID_REQUEST_WINDOW_MS 1000

int replay_mid_requests(struct replay *r, struct viewstamp *first)
{
	int n = 0;

	for (int b = 0; b < NBUCKETS; b++)
		for (struct rconn *c = r->buckets[b]; c; c = c->next) {
			struct replay_tap *t = c->tap;

			if (c->dead || !t || __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TAP_CLAIMED ||
			    !__atomic_load_n(&t->unanswered, __ATOMIC_ACQUIRE) ||
			    r->cur_stamp > __atomic_load_n(&t->read_stamp_ms, __ATOMIC_RELAXED) +
						   MID_REQUEST_WINDOW_MS)
				continue;
			if (!n++ && first)
				*first = c->vs;
		}
	return n;
}

/* A new view begins: the connections of earlier views ended with their
 * leader (their clients reconnect to the new one), so every replica closes
 * them here, at the same point of the log. */
static int exec_noop(struct replay *r, const struct entry_hdr *e)
{
	for (int b = 0; b < NBUCKETS; b++)
		while (r->buckets[b]) {
			struct rconn *c = r->buckets[b];

			if (!c->dead) {
				if (sched_full(r))
					return 0;	/* resumed with the connections left */
				sched_push(r, c->tap, ENTRY_CLOSE, 0, NULL);
				r->close_tail = r->tail;
				sys.shutdown(c->sock, SHUT_WR);
			}
			conn_closing(r, c);
		}
	(void)e;
	return 1;
}

/* The leader's server learned a child's end here: ours learns it here too,
 * once it has taken every turn before (input_child.h). */
static int exec_child(struct replay *r, const struct entry_hdr *e)
{
	uint64_t forked_at;

	if (e->data_sz != sizeof(forked_at))
		return 1;
	if (sched_head(r, &(uint64_t){ 0 }))
		return 0;	/* the server has yet to take earlier turns */
	if (!r->phase) {
		r->phase = 1;
		r->started_ns = now_ns();
	}
	memcpy(&forked_at, entry_data(e), sizeof(forked_at));
	return input_child_due(forked_at, e->idx, r->cur_stamp, now_ns() - r->started_ns,
			       forked_at > r->n->exec.seed_idx);
}

/* A child of the leader's server had exited before its next input: ours
 * has too before that input (input_child.h). */
static int exec_child_exit(struct replay *r, const struct entry_hdr *e)
{
	uint64_t forked_at;

	if (e->data_sz != sizeof(forked_at))
		return 1;
	if (sched_head(r, &(uint64_t){ 0 }))
		return 0;	/* the request that forks it may not have run yet */
	if (!r->phase) {
		r->phase = 1;
		r->started_ns = now_ns();
	}
	memcpy(&forked_at, entry_data(e), sizeof(forked_at));
	return input_child_exit_due(forked_at, e->idx, now_ns() - r->started_ns,
				    forked_at > r->n->exec.seed_idx);
}

/* The leader's output marks. */
static int exec_hash(struct replay *r, const struct entry_hdr *e)
{
	const struct out_record *rec = entry_data(e);
	size_t n = e->data_sz / sizeof(*rec);

	for (size_t i = 0; i < n && r->n->cfg.checker; i++) {
		struct rconn *c = conn_find_any(r, rec[i].conn_idx);
		if (c) {
			pthread_mutex_lock(&r->out_lock);
			out_check_leader(&c->chk, rec[i].offset, rec[i].crc, e->idx);
			pthread_mutex_unlock(&r->out_lock);
		}
	}
	return 1;
}

int replay_exec(struct replay *r, const struct entry_hdr *e)
{
	int done;

	if (r->cur_idx != e->idx) {
		r->cur_idx = e->idx;
		r->cur_stamp = input_clock_expand(e->stamp_ms);
		r->cur_flags = e->flags;
		/* A leader this node becomes stamps on from here. */
		struct node *n = r->n;
		if (r->cur_stamp > __atomic_load_n(&n->stamp_ms, __ATOMIC_RELAXED))
			__atomic_store_n(&n->stamp_ms, r->cur_stamp, __ATOMIC_RELAXED);
		r->started_ns = r->progress_ns = now_ns();
		r->seen_off = UINT64_MAX;
		r->phase = 0;
		r->sent_off = 0;
	}
	switch (e->type) {
	case ENTRY_ACCEPT:
		done = exec_accept(r, e);
		break;
	case ENTRY_RECV:
		done = exec_recv(r, e);
		break;
	case ENTRY_CLOSE:
		done = exec_close(r, e);
		break;
	case ENTRY_HASH:
		done = exec_hash(r, e);
		break;
	case ENTRY_NOOP:
		done = exec_noop(r, e);
		break;
	case ENTRY_CHILD:
		done = exec_child(r, e);
		break;
	case ENTRY_CHILD_EXIT:
		done = exec_child_exit(r, e);
		break;
	default:
		done = 1;
	}
	if (done)
		r->cur_idx = 0;
	__atomic_store_n(&r->waiting, !done, __ATOMIC_RELEASE);
	return done;
}

static void drain(struct replay *r)
{
	struct epoll_event evs[64];
	int n;

	if (!r->watched)
		return;	/* a leader long past its earlier views' connections */
	do {
		n = sys.epoll_wait(r->epfd, evs, 64, 0);
		for (int i = 0; i < n; i++)
			conn_drain(r, evs[i].data.ptr, 0);
	} while (n == 64);
}

/* A stalled held turn: its bytes go into the socket, readable out of turn
 * like any skipped turn's.  Called with take_lock held. */
static void release_held(struct replay *r, struct turn *s)
{
	const char *p = s->data + (s->len - s->remaining);
	uint64_t left = s->remaining;

	while (left) {
		ssize_t k = sys.send(s->tap->ours, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k <= 0) {
			pr_warn("could not pass %llu bytes of a skipped turn to the server",
				(unsigned long long)left);
			break;
		}
		__atomic_add_fetch(&s->tap->free_bytes, (uint64_t)k, __ATOMIC_RELEASE);
		p += k;
		left -= (uint64_t)k;
	}
	__atomic_sub_fetch(&r->held, s->remaining, __ATOMIC_RELEASE);
	s->remaining = 0;
}

/* Says which turn the server left untaken, and, for a connection it never
 * accepted, the TCP state of our end (SYN_SENT: its SYN never got in). */
static void warn_stall(struct replay *r, const struct turn *s)
{
	const struct rconn *c = s->tap->conn;
	struct tcp_info ti = { 0 };
	socklen_t tl = sizeof(ti);
	char why[96] = "";

	if (s->tap->srv_fd < 0) {
		if (s->tap->ours < 0 || getsockopt(s->tap->ours, IPPROTO_TCP, TCP_INFO, &ti, &tl))
			ti.tcpi_state = 0;
		snprintf(why, sizeof(why), "; it never accepted the connection (ours: tcp state %u)",
			 ti.tcpi_state);
	}
	pr_warn("the server left its turn (entry %llu, connection %llu.%llu, local port %ld) on "
		"fd %d untaken for %llu ms%s; moving on (replay order is no longer guaranteed for it)",
		(unsigned long long)s->idx, c ? (unsigned long long)c->vs.view : 0ULL,
		c ? (unsigned long long)c->vs.idx : 0ULL, (long)(s->tap - r->taps), s->tap->srv_fd,
		(unsigned long long)(STALL_NS / 1000000), why);
	if (turn_waits_answer(s))
		pr_warn("(that turn waited for the server to answer the connection's input before, "
			"as the leader's had when it read it)");
}

/* Skips turns of connections the server closed, and a turn the server has
 * left untaken for STALL_NS (its bytes may then be read out of turn). */
static void skip_dead_turns(struct replay *r)
{
	uint64_t h, now = now_ns();
	struct turn *s;

	while ((s = sched_head(r, &h))) {
		uint32_t st = __atomic_load_n(&s->tap->state, __ATOMIC_ACQUIRE);

		/* Void: the server closed the connection, the tap serves a newer
		 * one, or ours ended before the server ever accepted it (its
		 * socket is closed: nothing of it can reach the server now). */
		if (st == TAP_FREE || s->gen != s->tap->gen || (st == TAP_ARMED && !s->tap->conn)) {
			pthread_mutex_lock(&r->take_lock);
			if (s->data)
				__atomic_sub_fetch(&r->held, s->remaining, __ATOMIC_RELEASE);
			s->remaining = 0;
			sched_advance(r, h);
			pthread_mutex_unlock(&r->take_lock);
			continue;
		}
		if (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE)) {
			/* thread_order = requests: a request that runs long (a
			 * lock wait, a slow command) holds the others only so long. */
			/* (done_ns may be later than NOW, taken before the loop.)
			 * A thread that runs (a slow request, a loaded machine)
			 * keeps the order; one that waits (a lock) loses it. */
			/* One that has asked its connection for more input
			 * for as long (a thread per connection polling a socket
			 * that holds later turns' bytes, running all along)
			 * waits for input: on the leader others read meanwhile,
			 * or the log would hold its input next. */
			uint64_t asked = __atomic_load_n(&s->asked_ns, __ATOMIC_RELAXED);
			int waits = asked && __atomic_load_n(&s->last_ask_ns, __ATOMIC_RELAXED) -
							 asked >= ORDER_STALL_NS;
			if (waits) {
				sched_advance(r, h);
				continue;
			}
			if (__atomic_load_n(&s->done_ns, __ATOMIC_RELAXED) + ORDER_STALL_NS > now ||
			    thread_running(__atomic_load_n(&s->tap->reader, __ATOMIC_RELAXED)))
				return;
			if (now - r->order_warn_ns > 10000000000ULL) {
				r->order_warn_ns = now;
				pr_warn("a request on fd %d ran %llu ms without its thread asking for "
					"input: the next one starts beside it (request order given up "
					"for it; logged once per 10 s)", s->tap->srv_fd,
					(unsigned long long)(ORDER_STALL_NS / 1000000));
			}
			node_order_stalled(r->n);
			sched_advance(r, h);
			continue;
		}
		if (h != r->stall_head) {
			r->stall_head = h;
			r->stall_since = now;
			return;
		}
		if (now - r->stall_since < STALL_NS)
			return;
		warn_stall(r, s);
		pthread_mutex_lock(&r->take_lock);
		if (s->type == ENTRY_RECV && s->data)
			release_held(r, s);
		else if (s->type == ENTRY_RECV)
			__atomic_add_fetch(&s->tap->free_bytes, s->remaining, __ATOMIC_RELEASE);
		else
			__atomic_store_n(&s->tap->free_eof, 1, __ATOMIC_RELEASE);
		sched_advance(r, h);
		pthread_mutex_unlock(&r->take_lock);
	}
}

uint64_t replay_turns_taken(struct replay *r)
{
	return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
}

int replay_maintain(struct replay *r)
{
	uint64_t h, now = now_ns();

	drain(r);
	skip_dead_turns(r);
	for (struct rconn **pp = &r->closing; *pp;) {
		struct rconn *c = *pp;
		/* Done once the server's end is closed and we read all it wrote
		 * (its close frees the tap just before the FIN reaches us). */
		/* The linger starts once the server has taken (or we skipped)
		 * every turn of the connection: a server far behind (a restart
		 * catching up a long log) has not read its input yet, and
		 * closing our end would cut its replies and drop the rest. */
		if (!c->closed_ns && __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) >= c->last_turn)
			c->closed_ns = now;
		if (c->dead || c->eof || (c->closed_ns && now - c->closed_ns > LINGER_NS)) {
			*pp = c->next;
			conn_free(r, c);
		} else {
			pp = &c->next;
		}
	}
	return sched_head(r, &h) != NULL;
}
