/* tcp backend: one-sided writes emulated over TCP, for hosts without RDMA.
 * A writer sends (offset, length, bytes) frames on its own connection to
 * the target's peer_port; the target applies each frame into its region,
 * payload first and the last 8-byte word last with a release store, so the
 * canary rule holds by construction.  Receiving is driven by the protocol's
 * own waits: poll() applies what arrived, wait() blocks in epoll for one
 * thread at a time while the others sleep on the doorbell.  A slow
 * receiver slows the writer (blocking sends); nothing is dropped.
 *
 * Not yet here (issue 3): peer admission with a shared secret, fencing. */
#define LOG_PREFIX "tcp: "
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "futex.h"
#include "logger.h"
#include "region.h"
#include "transport.h"

#define HELLO_MAGIC 0x41505553u	/* "APUS" */
#define MAX_IN 16

struct frame {
	uint64_t off;
	uint32_t len;
	uint32_t pad;
};

struct tcp_in {		/* a peer writing into our region */
	int fd;
	int peer;	/* -1 until its hello arrived */
	size_t got;	/* bytes of the current header + payload received */
	struct frame hdr;
	uint32_t hello[2];
	uint64_t last;	/* the frame's last word, stored last */
};

struct tcp_out {	/* our connection for writing into a peer's region */
	int fd;
	pthread_mutex_t lock;
	int failing;		/* the last attempt failed (logged once) */
	uint64_t backoff_ns;	/* doubles while it keeps failing, up to BACKOFF_MAX_NS */
	uint64_t next_try_ns;
};

#define BACKOFF_MIN_NS (10 * 1000000ULL)
#define BACKOFF_MAX_NS (1000 * 1000000ULL)

struct tcp_transport {
	struct transport t;
	const struct apus_config *cfg;
	int self;
	char *local;
	size_t size;
	int lfd, epfd, evfd;
	pthread_mutex_t rx;	/* one receiver at a time */
	struct tcp_in in[MAX_IN];
	struct tcp_out out[APUS_MAX_NODES];
};

#define TCP(t) ((struct tcp_transport *)(t))

static struct region_ctl *local_ctl(struct tcp_transport *s)
{
	return (struct region_ctl *)s->local;
}

static int sockaddr_of(const struct node_conf *n, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, n->address, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)n->peer_port);
		*len = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, n->address, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)n->peer_port);
		*len = sizeof(*a6);
		return 0;
	}
	return -EINVAL;
}

static int tcp_open(const struct apus_config *cfg, int self, void *region, size_t size,
		    struct transport **out)
{
	struct tcp_transport *s = calloc(1, sizeof(*s));
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, err;

	if (!s)
		return -ENOMEM;
	s->t.ops = &transport_tcp_ops;
	s->cfg = cfg;
	s->self = self;
	s->local = region;
	s->size = size;
	pthread_mutex_init(&s->rx, NULL);
	for (int i = 0; i < APUS_MAX_NODES; i++) {
		s->out[i].fd = -1;
		pthread_mutex_init(&s->out[i].lock, NULL);
	}
	for (int i = 0; i < MAX_IN; i++)
		s->in[i].fd = -1;
	if (!cfg->nodes[self].peer_port || sockaddr_of(&cfg->nodes[self], &ss, &len)) {
		pr_err("node %d needs a numeric address and a peer_port for transport tcp", self);
		free(s);
		return -EINVAL;
	}
	s->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s->lfd < 0 || s->epfd < 0 || s->evfd < 0 || bind(s->lfd, (struct sockaddr *)&ss, len) < 0 ||
	    listen(s->lfd, 16) < 0) {
		err = -errno;
		pr_perror("cannot listen on %s:%d", cfg->nodes[self].address, cfg->nodes[self].peer_port);
		free(s);
		return err;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = -1 };
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev.data.fd = -2;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev);
	*out = &s->t;
	return 0;
}

static int send_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt) {
		ssize_t n = writev(fd, iov, cnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (cnt && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* A failed attempt: logged once per outage, next try after a back-off. */
static int connect_failed(struct tcp_transport *s, int peer, int err)
{
	struct tcp_out *o = &s->out[peer];
	const struct node_conf *n = &s->cfg->nodes[peer];

	if (!o->failing)
		pr_warn("node %d (%s:%d) is unreachable: %s; retrying with back-off", peer,
			n->address, n->peer_port, strerror(err));
	o->failing = 1;
	o->backoff_ns = o->backoff_ns ? o->backoff_ns * 2 : BACKOFF_MIN_NS;
	if (o->backoff_ns > BACKOFF_MAX_NS)
		o->backoff_ns = BACKOFF_MAX_NS;
	o->next_try_ns = now_ns() + o->backoff_ns;
	return -EAGAIN;
}

static int tcp_connect(struct transport *t, int peer)
{
	struct tcp_transport *s = TCP(t);
	struct tcp_out *o = &s->out[peer];
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, rc;

	if (__atomic_load_n(&o->fd, __ATOMIC_ACQUIRE) >= 0)
		return 0;
	if (o->failing && now_ns() < o->next_try_ns)
		return -EAGAIN;
	if (sockaddr_of(&s->cfg->nodes[peer], &ss, &len))
		return -EINVAL;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		rc = errno;
		close(fd);
		return connect_failed(s, peer, rc);
	}
	struct pollfd p = { fd, POLLOUT, 0 };
	int err = 0;
	socklen_t elen = sizeof(err);
	if (poll(&p, 1, 100) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err) {
		close(fd);
		return connect_failed(s, peer, err ? err : ETIMEDOUT);
	}
	/* Writes block from now on: a slow receiver slows the writer. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	uint32_t hello[2] = { HELLO_MAGIC, (uint32_t)s->self };
	struct iovec iov = { hello, sizeof(hello) };
	if ((rc = send_all(fd, &iov, 1))) {
		close(fd);
		return connect_failed(s, peer, -rc);
	}
	if (o->failing)
		pr_info("node %d is reachable again", peer);
	o->failing = 0;
	o->backoff_ns = 0;
	__atomic_store_n(&o->fd, fd, __ATOMIC_RELEASE);
	return 0;
}

static int tcp_connected(struct transport *t, int peer)
{
	return __atomic_load_n(&TCP(t)->out[peer].fd, __ATOMIC_ACQUIRE) >= 0;
}

static void out_drop(struct tcp_out *o)
{
	int fd = __atomic_exchange_n(&o->fd, -1, __ATOMIC_ACQ_REL);

	if (fd >= 0)
		close(fd);
}

static int tcp_write(struct transport *t, int peer, uint64_t off, const void *buf, size_t len)
{
	struct tcp_transport *s = TCP(t);
	struct tcp_out *o = &s->out[peer];
	struct frame f = { off, (uint32_t)len, 0 };
	struct iovec iov[2] = { { &f, sizeof(f) }, { (void *)buf, len } };
	int rc;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	pthread_mutex_lock(&o->lock);
	if (o->fd < 0) {
		pthread_mutex_unlock(&o->lock);
		return -ENOTCONN;
	}
	rc = send_all(o->fd, iov, 2);
	if (rc) {
		pr_warn("write to node %d failed: %s", peer, strerror(-rc));
		out_drop(o);
	}
	pthread_mutex_unlock(&o->lock);
	return rc;
}

static void tcp_ring(struct transport *t, int peer)
{
	(void)t, (void)peer;	/* every frame rings the receiver's doorbell */
}

static void in_close(struct tcp_transport *s, struct tcp_in *in)
{
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, in->fd, NULL);
	close(in->fd);
	in->fd = -1;
}

static void accept_peers(struct tcp_transport *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), i;

		if (fd < 0)
			return;
		for (i = 0; i < MAX_IN && s->in[i].fd >= 0; i++)
			;
		if (i == MAX_IN) {
			close(fd);
			continue;
		}
		s->in[i] = (struct tcp_in){ .fd = fd, .peer = -1 };
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = i };
		epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* Receives what IN sent; applies whole frames.  Returns frames applied. */
static int in_receive(struct tcp_transport *s, struct tcp_in *in)
{
	int applied = 0;

	for (;;) {
		char *dst;
		size_t want;

		if (in->peer < 0) {
			dst = (char *)in->hello + in->got;
			want = sizeof(in->hello) - in->got;
		} else if (in->got < sizeof(in->hdr)) {
			dst = (char *)&in->hdr + in->got;
			want = sizeof(in->hdr) - in->got;
		} else {
			size_t body = in->got - sizeof(in->hdr);
			size_t len = in->hdr.len, head = len >= 8 ? len - 8 : 0;
			/* Payload straight into the region; its last word apart. */
			dst = body < head ? s->local + in->hdr.off + body
					  : (char *)&in->last + (body - head);
			want = body < head ? head - body : len - body;
		}
		ssize_t n = want ? recv(in->fd, dst, want, MSG_DONTWAIT) : 0;
		if (want && n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return applied;
			in_close(s, in);	/* the writer went away */
			return applied;
		}
		in->got += (size_t)n;
		if (in->peer < 0) {
			if (in->got < sizeof(in->hello))
				continue;
			if (in->hello[0] != HELLO_MAGIC || in->hello[1] >= (uint32_t)s->cfg->nnodes) {
				pr_warn("refused a peer connection with a bad hello");
				in_close(s, in);
				return applied;
			}
			in->peer = (int)in->hello[1];
			in->got = 0;
			continue;
		}
		if (in->got == sizeof(in->hdr) &&
		    (in->hdr.off > s->size || in->hdr.len > s->size - in->hdr.off)) {
			pr_err("node %d wrote outside our region; dropping it", in->peer);
			in_close(s, in);
			return applied;
		}
		if (in->got < sizeof(in->hdr) + in->hdr.len)
			continue;
		/* Whole frame: the last word (or the short write) lands last. */
		char *at = s->local + in->hdr.off;
		if (in->hdr.len >= 8)
			__atomic_store_n((uint64_t *)(void *)(at + in->hdr.len - 8), in->last,
					 __ATOMIC_RELEASE);
		else if (in->hdr.len)
			memcpy(at, &in->last, in->hdr.len);
		in->got = 0;
		applied++;
	}
}

static int tcp_poll(struct transport *t)
{
	struct tcp_transport *s = TCP(t);
	int applied = 0;

	if (pthread_mutex_trylock(&s->rx))
		return 0;	/* another thread is receiving */
	accept_peers(s);
	for (int i = 0; i < MAX_IN; i++)
		if (s->in[i].fd >= 0)
			applied += in_receive(s, &s->in[i]);
	pthread_mutex_unlock(&s->rx);
	if (applied)
		bell_ring(&local_ctl(s)->bell, &local_ctl(s)->sleepers);
	return applied;
}

static uint32_t tcp_bell(struct transport *t)
{
	return __atomic_load_n(&local_ctl(TCP(t))->bell, __ATOMIC_SEQ_CST);
}

static void tcp_wait(struct transport *t, uint32_t seen, int timeout_us)
{
	struct tcp_transport *s = TCP(t);
	struct region_ctl *c = local_ctl(s);
	struct epoll_event ev[8];
	uint64_t drain;

	if (tcp_poll(t) || __atomic_load_n(&c->bell, __ATOMIC_SEQ_CST) != seen)
		return;
	if (pthread_mutex_trylock(&s->rx)) {
		/* Another thread receives: sleep until it rings. */
		bell_wait(&c->bell, &c->sleepers, seen, timeout_us);
		return;
	}
	epoll_wait(s->epfd, ev, 8, timeout_us < 1000 ? 1 : timeout_us / 1000);
	if (read(s->evfd, &drain, sizeof(drain)) < 0 && errno != EAGAIN)
		pr_debug("eventfd: %s", strerror(errno));
	pthread_mutex_unlock(&s->rx);
	tcp_poll(t);
	/* Hand the receiving over to a sleeper, if any. */
	if (__atomic_load_n(&c->sleepers, __ATOMIC_SEQ_CST))
		bell_ring(&c->bell, &c->sleepers);
}

static void tcp_wake(struct transport *t)
{
	struct tcp_transport *s = TCP(t);
	uint64_t one = 1;

	bell_ring(&local_ctl(s)->bell, &local_ctl(s)->sleepers);
	if (write(s->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		pr_debug("eventfd: %s", strerror(errno));
}

static int tcp_check(struct transport *t, int peer)
{
	struct tcp_out *o = &TCP(t)->out[peer];
	int fd = __atomic_load_n(&o->fd, __ATOMIC_ACQUIRE);
	struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };

	if (fd < 0)
		return -ENOTCONN;
	/* The peer never sends on our connection: readable means it closed. */
	if (poll(&p, 1, 0) == 0)
		return 0;
	pthread_mutex_lock(&o->lock);
	out_drop(o);
	pthread_mutex_unlock(&o->lock);
	return -ECONNRESET;
}

static int tcp_fence(struct transport *t, int peer)
{
	(void)t, (void)peer;
	return -ENOTSUP;	/* comes with leader election (issue 4) */
}

static void tcp_close(struct transport *t)
{
	struct tcp_transport *s = TCP(t);

	for (int i = 0; i < APUS_MAX_NODES; i++)
		out_drop(&s->out[i]);
	for (int i = 0; i < MAX_IN; i++)
		if (s->in[i].fd >= 0)
			close(s->in[i].fd);
	close(s->lfd);
	close(s->epfd);
	close(s->evfd);
	free(s);
}

const struct transport_ops transport_tcp_ops = {
	.name = "tcp",
	.open = tcp_open,
	.connect = tcp_connect,
	.connected = tcp_connected,
	.check = tcp_check,
	.write = tcp_write,
	.ring = tcp_ring,
	.poll = tcp_poll,
	.bell = tcp_bell,
	.wait = tcp_wait,
	.wake = tcp_wake,
	.fence = tcp_fence,
	.close = tcp_close,
};
