#define LOG_PREFIX "replay: "
#include "replay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "logger.h"
#include "node.h"

/* How long the server may leave replayed bytes unread, without reading
 * anything, before we stop waiting (a blocked or paused client). */
#define STALL_NS (200 * 1000000ULL)
#define ACCEPT_TIMEOUT_NS (5000 * 1000000ULL)
#define NBUCKETS 4096

enum tap_state { TAP_FREE = 0, TAP_ARMED, TAP_CLAIMED };

struct replay_tap {
	uint32_t state;
	int32_t srv_fd;
	uint64_t consumed;	/* bytes the server read */
	uint32_t eof;		/* the server read end of stream */
	uint32_t pad;
};

struct rconn {
	struct viewstamp vs;
	int sock;
	int dead;		/* the server dropped it: skip its entries */
	struct replay_tap *tap;
	uint64_t sent;
	struct rconn *next;
};

struct replay {
	struct node *n;
	struct sockaddr_storage app;	/* the local server's application address */
	socklen_t app_len;
	int epfd;
	struct replay_tap *taps;	/* indexed by our local port */
	struct rconn *buckets[NBUCKETS];
	unsigned nconns;

	/* The entry in progress. */
	uint64_t cur_idx;
	int phase;
	size_t sent_off;
	uint64_t mark_ns;	/* when the server last made progress */
	uint64_t mark_val;

	char drain_buf[64 * 1024];
};

struct replay *replay_new(struct node *n)
{
	const struct node_conf *nc = &n->cfg.nodes[n->self];
	struct replay *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->n = n;
	r->taps = calloc(65536, sizeof(*r->taps));
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!r->taps || r->epfd < 0)
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
	if (r->epfd > 0)
		close(r->epfd);
	free(r->taps);
	free(r);
	return NULL;
}

unsigned replay_conn_count(const struct replay *r)
{
	return r->nconns;
}

static struct rconn *conn_find(struct replay *r, uint64_t idx)
{
	for (struct rconn *c = r->buckets[idx % NBUCKETS]; c; c = c->next)
		if (c->vs.idx == idx)
			return c;
	return NULL;
}

static void conn_remove(struct replay *r, struct rconn *c)
{
	struct rconn **pp = &r->buckets[c->vs.idx % NBUCKETS];

	while (*pp != c)
		pp = &(*pp)->next;
	*pp = c->next;
	if (c->sock >= 0)
		close(c->sock);
	r->nconns--;
	free(c);
}

/* A client socket bound to our address with a port whose tap is free. */
static int open_replay_socket(struct replay *r, struct replay_tap **tapp)
{
	for (int tries = 0; tries < 16; tries++) {
		struct sockaddr_storage local = r->app;
		socklen_t len = r->app_len;
		int s = socket(r->app.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		uint16_t port;

		if (s < 0)
			return -errno;
		if (local.ss_family == AF_INET)
			((struct sockaddr_in *)&local)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&local)->sin6_port = 0;
		/* Bound before connecting: the tap must be armed before the
		 * server can possibly accept. */
		if (bind(s, (struct sockaddr *)&local, len) < 0 ||
		    getsockname(s, (struct sockaddr *)&local, &len) < 0) {
			int e = -errno;
			close(s);
			return e;
		}
		port = ntohs(local.ss_family == AF_INET ? ((struct sockaddr_in *)&local)->sin_port
							: ((struct sockaddr_in6 *)&local)->sin6_port);
		struct replay_tap *t = &r->taps[port];
		if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TAP_FREE) {
			close(s);	/* the server still holds the old connection on this port */
			continue;
		}
		t->srv_fd = -1;
		t->eof = 0;
		__atomic_store_n(&t->consumed, 0, __ATOMIC_RELAXED);
		/* Pairs with the CAS in replay_tap_claim(). */
		__atomic_store_n(&t->state, TAP_ARMED, __ATOMIC_RELEASE);
		*tapp = t;
		return s;
	}
	return -EADDRINUSE;
}

static int exec_accept(struct replay *r, const struct entry_hdr *e)
{
	struct rconn *c;

	if (r->phase == 0) {
		struct replay_tap *tap = NULL;
		int s = open_replay_socket(r, &tap);

		c = calloc(1, sizeof(*c));
		if (!c) {
			if (s >= 0)
				close(s);
			pr_err("out of memory for connection %llu", (unsigned long long)e->idx);
			return 1;
		}
		c->vs = (struct viewstamp){ e->view, e->idx };
		c->sock = s;
		c->tap = tap;
		c->next = r->buckets[e->idx % NBUCKETS];
		r->buckets[e->idx % NBUCKETS] = c;
		r->nconns++;
		if (s < 0) {
			pr_err("connection %llu: no socket: %s", (unsigned long long)e->idx,
			       strerror(-s));
			c->dead = 1;
			return 1;
		}
		if (connect(s, (struct sockaddr *)&r->app, r->app_len) < 0 && errno != EINPROGRESS) {
			pr_perror("connection %llu: cannot connect to the local server",
				  (unsigned long long)e->idx);
			c->dead = 1;
			return 1;
		}
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(r->epfd, EPOLL_CTL_ADD, s, &ev);
		r->phase = 1;
		r->mark_ns = now_ns();
	}
	c = conn_find(r, e->idx);
	if (__atomic_load_n(&c->tap->state, __ATOMIC_ACQUIRE) == TAP_CLAIMED)
		return 1;
	if (now_ns() - r->mark_ns > ACCEPT_TIMEOUT_NS) {
		pr_warn("connection %llu: the server did not accept it in time",
			(unsigned long long)e->idx);
		return 1;
	}
	return 0;
}

/* 1 once the server read everything sent on C (or stopped reading). */
static int server_caught_up(struct replay *r, struct rconn *c, int want_eof)
{
	struct replay_tap *t = c->tap;
	uint64_t got;

	if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TAP_CLAIMED)
		return 1;	/* the server closed it (or never took it) */
	got = __atomic_load_n(&t->consumed, __ATOMIC_ACQUIRE);
	uint32_t eof = __atomic_load_n(&t->eof, __ATOMIC_ACQUIRE);
	if (got >= c->sent && (!want_eof || eof))
		return 1;
	if (got + eof != r->mark_val) {
		r->mark_val = got + eof;
		r->mark_ns = now_ns();
		return 0;
	}
	if (now_ns() - r->mark_ns > STALL_NS) {
		pr_debug("connection %llu: server left %llu bytes unread; moving on",
			 (unsigned long long)c->vs.idx, (unsigned long long)(c->sent - got));
		return 1;
	}
	return 0;
}

static int exec_recv(struct replay *r, const struct entry_hdr *e)
{
	struct rconn *c = conn_find(r, e->conn_idx);

	if (!c || c->dead)
		return 1;
	if (r->phase == 0) {
		const char *data = entry_data(e);

		while (r->sent_off < e->data_sz) {
			ssize_t k = send(c->sock, data + r->sent_off, e->data_sz - r->sent_off,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k > 0) {
				r->sent_off += (size_t)k;
				continue;
			}
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				return 0;	/* the server is behind: drain and retry */
			c->dead = 1;
			return 1;
		}
		c->sent += e->data_sz;
		r->phase = 1;
		r->mark_val = UINT64_MAX;
	}
	return server_caught_up(r, c, 0);
}

static int exec_close(struct replay *r, const struct entry_hdr *e)
{
	struct rconn *c = conn_find(r, e->conn_idx);

	if (!c)
		return 1;
	if (r->phase == 0) {
		if (c->sock >= 0 && !c->dead)
			shutdown(c->sock, SHUT_WR);
		r->phase = 1;
		r->mark_val = UINT64_MAX;
	}
	if (c->sock >= 0 && !c->dead && c->tap && !server_caught_up(r, c, 1))
		return 0;
	replay_drain(r);
	conn_remove(r, c);
	return 1;
}

int replay_exec(struct replay *r, const struct entry_hdr *e)
{
	int done;

	if (r->cur_idx != e->idx) {
		r->cur_idx = e->idx;
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
	default:
		done = 1;
	}
	if (done)
		r->cur_idx = 0;
	return done;
}

void replay_drain(struct replay *r)
{
	struct epoll_event evs[64];
	int n;

	do {
		n = epoll_wait(r->epfd, evs, 64, 0);
		for (int i = 0; i < n; i++) {
			struct rconn *c = evs[i].data.ptr;

			for (;;) {
				ssize_t k = recv(c->sock, r->drain_buf, sizeof(r->drain_buf),
						 MSG_DONTWAIT);
				if (k > 0)
					continue;
				if (k < 0 && (errno == EAGAIN || errno == EINTR))
					break;
				/* End of stream or error: nothing more will come. */
				epoll_ctl(r->epfd, EPOLL_CTL_DEL, c->sock, NULL);
				break;
			}
		}
	} while (n == 64);
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
	/* Pairs with the release store of TAP_ARMED in open_replay_socket(). */
	if (!__atomic_compare_exchange_n(&t->state, &armed, TAP_CLAIMED, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return NULL;
	t->srv_fd = fd;
	r->n->ops->wake(r->n->tp);
	return t;
}

void replay_tap_read(struct replay *r, struct replay_tap *t, ssize_t n)
{
	if (n > 0)
		__atomic_add_fetch(&t->consumed, (uint64_t)n, __ATOMIC_RELEASE);
	else
		__atomic_store_n(&t->eof, 1, __ATOMIC_RELEASE);
	r->n->ops->wake(r->n->tp);
}

void replay_tap_close(struct replay *r, struct replay_tap *t)
{
	__atomic_store_n(&t->state, TAP_FREE, __ATOMIC_RELEASE);
	r->n->ops->wake(r->n->tp);
}
