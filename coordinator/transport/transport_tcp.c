/* tcp backend: one-sided writes emulated over TCP, for hosts without RDMA.
 * A writer sends (offset, length, bytes) frames on its own connection to
 * the target's peer_port; the target applies each frame into its region,
 * payload first and the last 8-byte word last with a release store, so the
 * canary rule holds by construction.  Receiving is driven by the protocol's
 * own waits: poll() applies what arrived, wait() blocks in epoll for one
 * thread at a time while the others sleep on the doorbell.  A slow
 * receiver slows the writer (blocking sends); nothing is dropped.
 *
 * Admission (admission.h): before any frame is applied, the connecting
 * peer must come from the configured address of the node it claims to be
 * and both sides prove the cluster secret:
 *   C -> A  hello     {magic, version, from, to, nonce_c, C's incarnation}
 *   A -> C  challenge {nonce_a, HMAC(key, "apus-tcp-accept", from, to, nonce_c, nonce_a)}
 *   C -> A  proof     {HMAC(key, "apus-tcp-connect", from, to, nonce_a, nonce_c)}
 *   A -> C  welcome   {magic, A's incarnation}
 * then frames.  An incarnation is random per open(): one per process.
 *
 * Fencing is per incarnation (tcp_fence): the fenced peer's connections are
 * closed and the incarnation that runs now is refused; a later incarnation
 * (the node restarted) is admitted again, which lifts the fence.  An
 * incarnation counts only once its connection proved the secret, so an
 * impostor cannot lift a fence by making one up. */
#define LOG_PREFIX "tcp: "
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/transport/admission.h"
#include "common/clock.h"
#include "common/futex.h"
#include "common/logger.h"
#include "common/netaddr.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/transport/rxwait.h"
#include "common/sys.h"
#include "coordinator/transport/transport.h"

#define HELLO_MAGIC 0x41505553u	/* "APUS" */
#define HELLO_VERSION 2	/* 2: the hello carries the connector's incarnation */
#define MAX_IN 16
_Static_assert(MAX_IN > APUS_MAX_NODES, "a slot for a handshake besides every admitted peer");
#define IN_BUF 16384
#define OUT_BUF 8192
#define POLL_EVENTS 16
#define HANDSHAKE_NS (2000 * 1000000ULL)	/* an unfinished handshake is dropped */
#define CHALLENGE_TIMEOUT_MS 1000
#define SEND_TIMEOUT_S 1
#define REFUSED_BURST 20	/* refusals logged at once before one a second */

/* Every field at a fixed offset, no padding: the acceptor reads it as
 * bytes off the wire. */
struct hello {
	uint32_t magic;
	uint16_t version;
	uint8_t from, to;
	uint8_t nonce[ADMIT_NONCE_LEN];
	uint64_t incarnation;	/* the connector's (never 0): what fence() refuses */
};
_Static_assert(offsetof(struct hello, nonce) == 8 &&
		       offsetof(struct hello, incarnation) == 8 + ADMIT_NONCE_LEN &&
		       sizeof(struct hello) == 16 + ADMIT_NONCE_LEN,
	       "hello layout");

struct welcome {
	uint32_t magic;
	uint32_t flags;		/* WELCOME_FENCED */
	uint64_t incarnation;	/* random per open(): tells a restart from a reconnect */
};

/* Not admitted after all: this incarnation of the connector is fenced.  Sent
 * only once it proved the secret, so that it learns why and can come back
 * as a new incarnation (a deposed leader re-executed and reached a peer
 * before the peer fenced "the old leader": the new one was fenced). */
#define WELCOME_FENCED 1u

/* prove()'s answer when the peer fenced us. */
static const char fenced_why[] = "it fenced this process of ours";

struct challenge {
	uint8_t nonce[ADMIT_NONCE_LEN];
	uint8_t mac[ADMIT_MAC_LEN];
};

enum in_state { IN_HELLO, IN_PROOF, IN_FRAMES };

struct frame {
	uint64_t off;
	uint32_t len;
	uint32_t pad;
};

struct tcp_in {		/* a peer writing into our region */
	int fd;
	int state;	/* enum in_state */
	int peer;	/* -1 until admitted */
	size_t got;	/* bytes of the current message received */
	uint64_t since_ns;	/* when it connected */
	struct sockaddr_storage addr;
	union {
		struct hello hello;
		uint8_t proof[ADMIT_MAC_LEN];
		struct frame hdr;
	} u;
	uint8_t nonce_c[ADMIT_NONCE_LEN], nonce_a[ADMIT_NONCE_LEN];
	uint64_t inc;	/* the incarnation its hello gave */
	uint64_t last;	/* the frame's last word, stored last */
	/* Small frames (acks, control words) arrive many to a segment: one
	 * recv fills this buffer and they are parsed from it. */
	uint32_t bstart, bend;
	int drained;	/* the last recv came back short: wait for epoll */
	char buf[IN_BUF];
};

struct tcp_out {	/* our connection for writing into a peer's region */
	int fd;
	pthread_mutex_t lock;
	/* Frames held until ring() (or until they no longer fit): a backup's
	 * ack is several words, and one segment wakes the leader once. */
	size_t olen;
	char obuf[OUT_BUF];
	int failing;		/* the last attempt failed (logged once per reason) */
	int restarted;		/* the last connect reached a new incarnation */
	int stale;		/* atomic: the peer wrote to us as a newer incarnation */
	uint64_t incarnation;	/* of the peer when we last reached it; 0: never */
	char why[96];		/* why it failed */
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
	struct admit_key key;
	uint64_t incarnation;	/* ours, sent in every hello and welcome */
	/* Fencing, under rx: a bit per fenced peer, and the incarnation of it
	 * that the fence refuses (0: none was known; see tcp_fence). */
	uint32_t fenced;
	uint64_t fenced_inc[APUS_MAX_NODES];
	/* Atomic: each peer's incarnation as we last learned it from a proven
	 * connection, its own (admitted) or ours (its welcome); 0: never. */
	uint64_t peer_inc[APUS_MAX_NODES];
	uint64_t refused_log_ns;	/* refusal log budget: a burst, then one a second */
	unsigned refused_tokens;
	unsigned refused_quiet;	/* refusals not logged since */
	struct tcp_in in[MAX_IN];
	struct tcp_out out[APUS_MAX_NODES];
};

#define TCP(t) ((struct tcp_transport *)(t))

static struct region_ctl *local_ctl(struct tcp_transport *s)
{
	return (struct region_ctl *)s->local;
}

/* A random incarnation, never 0 (0 means "never reached"). */
static uint64_t new_incarnation(void)
{
	uint8_t rnd[ADMIT_NONCE_LEN] = { 0 };
	uint64_t inc;

	if (admit_nonce(rnd))
		pr_warn("no random numbers for our incarnation; using the clock");
	memcpy(&inc, rnd, sizeof(inc));
	inc ^= now_ns();
	return inc ? inc : 1;
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
	char kerr[PATH_MAX + 128];
	if ((err = admit_key_load(cfg->nodes[self].secret_file, &s->key, kerr, sizeof(kerr)))) {
		pr_err("%s", kerr);
		free(s);
		return err;
	}
	s->t.ops = &transport_tcp_ops;
	s->incarnation = new_incarnation();
	s->refused_tokens = REFUSED_BURST;
	s->refused_log_ns = now_ns();
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
	const struct node_conf *me = &cfg->nodes[self];
	if (!me->peer_port || node_sockaddr(me, me->peer_port, &ss, &len)) {
		pr_err("node %d needs a numeric address and a peer_port for transport tcp", self);
		free(s);
		return -EINVAL;
	}
	s->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s->lfd < 0 || s->epfd < 0 || s->evfd < 0 || bind(s->lfd, (struct sockaddr *)&ss, len) < 0 ||
	    sys.listen(s->lfd, 16) < 0) {
		err = -errno;
		pr_perror("cannot listen on %s:%d", cfg->nodes[self].address, cfg->nodes[self].peer_port);
		free(s);
		return err;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = -1 };
	sys.epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev.data.fd = -2;
	sys.epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev);
	*out = &s->t;
	return 0;
}

static int send_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt) {
		/* MSG_NOSIGNAL: a peer that hung up must not SIGPIPE the server. */
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
		ssize_t n = sys.sendmsg(fd, &m, MSG_NOSIGNAL);
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
/* Returns -ECONNREFUSED when the peer's host answered that nothing
 * listens (its process is gone: a backup suspects a leader at once), else
 * -EAGAIN (try again after the back-off). */
static int connect_failed(struct tcp_transport *s, int peer, int err, const char *why)
{
	struct tcp_out *o = &s->out[peer];
	const struct node_conf *n = &s->cfg->nodes[peer];

	if (!o->failing || strcmp(o->why, why))
		pr_warn("node %d (%s:%d) is unreachable: %s; retrying with back-off", peer,
			n->address, n->peer_port, why);
	snprintf(o->why, sizeof(o->why), "%s", why);
	o->failing = 1;
	o->backoff_ns = o->backoff_ns ? o->backoff_ns * 2 : BACKOFF_MIN_NS;
	if (o->backoff_ns > BACKOFF_MAX_NS)
		o->backoff_ns = BACKOFF_MAX_NS;
	o->next_try_ns = now_ns() + o->backoff_ns;
	return err == ECONNREFUSED || err == EACCES ? -err : -EAGAIN;
}

static int tcp_poll(struct transport *t);

/* Receives exactly LEN bytes within TIMEOUT_MS: 0, or -errno.  Keeps our
 * own receiving going meanwhile: the peer may be waiting, in its connect,
 * for our answer to its own handshake. */
static int recv_timed(struct tcp_transport *s, int fd, void *buf, size_t len, int timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	size_t got = 0;

	while (got < len) {
		uint64_t now = now_ns();
		struct pollfd p[2] = { { fd, POLLIN, 0 }, { s->epfd, POLLIN, 0 } };

		if (now >= end)
			return -ETIMEDOUT;
		if (sys.poll(p, 2, (int)((end - now) / 1000000ULL) + 1) < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents)
			tcp_poll(&s->t);
		if (!p[0].revents)
			continue;
		ssize_t n = sys.recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNREFUSED;	/* it hung up: it refused us */
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	return 0;
}

/* Our side of the admission handshake on a connected socket. */
static const char *prove(struct tcp_transport *s, int fd, int peer)
{
	struct hello h = { HELLO_MAGIC, HELLO_VERSION, (uint8_t)s->self, (uint8_t)peer, { 0 },
			   __atomic_load_n(&s->incarnation, __ATOMIC_RELAXED) };
	struct challenge ch;
	uint8_t proof[ADMIT_MAC_LEN];
	struct welcome w;
	struct iovec iov = { &h, sizeof(h) };

	if (admit_nonce(h.nonce))
		return "no random numbers";
	if (send_all(fd, &iov, 1))
		return "connection lost during the handshake";
	if (recv_timed(s, fd, &ch, sizeof(ch), CHALLENGE_TIMEOUT_MS))
		return "it refused us (check its log: address or cluster secret)";
	if (admit_verify(&s->key, "apus-tcp-accept", (uint32_t)s->self, (uint32_t)peer, h.nonce,
			 sizeof(h.nonce), ch.nonce, sizeof(ch.nonce), ch.mac))
		return "it does not know our cluster secret";
	admit_mac(&s->key, "apus-tcp-connect", (uint32_t)s->self, (uint32_t)peer, ch.nonce,
		  sizeof(ch.nonce), h.nonce, sizeof(h.nonce), proof);
	iov = (struct iovec){ proof, sizeof(proof) };
	if (send_all(fd, &iov, 1))
		return "connection lost during the handshake";
	if (recv_timed(s, fd, &w, sizeof(w), CHALLENGE_TIMEOUT_MS) || w.magic != HELLO_MAGIC)
		return "it refused our proof (different cluster secret?)";
	if (w.flags & WELCOME_FENCED)
		return fenced_why;
	struct tcp_out *o = &s->out[peer];
	if (o->incarnation && o->incarnation != w.incarnation)
		o->restarted = 1;
	o->incarnation = w.incarnation;
	/* Also what a fence of PEER refuses if it never wrote to us. */
	__atomic_store_n(&s->peer_inc[peer], w.incarnation, __ATOMIC_RELAXED);
	return NULL;
}

static int tcp_connect(struct transport *t, int peer)
{
	struct tcp_transport *s = TCP(t);
	struct tcp_out *o = &s->out[peer];
	struct sockaddr_storage ss, me;
	socklen_t len, melen;
	const char *why;
	int fd, one = 1;

	if (__atomic_load_n(&o->fd, __ATOMIC_ACQUIRE) >= 0)
		return 0;
	if (o->failing && now_ns() < o->next_try_ns)
		return -EAGAIN;
	const struct node_conf *to = &s->cfg->nodes[peer];
	if (node_sockaddr(to, to->peer_port, &ss, &len) ||
	    node_sockaddr(&s->cfg->nodes[s->self], 0, &me, &melen))
		return -EINVAL;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* From our configured address: peers admit us by it. */
	if (me.ss_family == ss.ss_family) {
		((struct sockaddr_in *)&me)->sin_port = 0;	/* same offset in sockaddr_in6 */
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&me, melen) < 0)
			pr_debug("cannot bind to %s: %s", s->cfg->nodes[s->self].address,
				 strerror(errno));
	}
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		int e = errno;
		sys.close(fd);
		return connect_failed(s, peer, e, strerror(e));
	}
	struct pollfd p = { fd, POLLOUT, 0 };
	int err = 0;
	socklen_t elen = sizeof(err);
	if (sys.poll(&p, 1, 100) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err) {
		sys.close(fd);
		return connect_failed(s, peer, err, strerror(err ? err : ETIMEDOUT));
	}
	/* Writes block from now on: a slow receiver slows the writer.  One
	 * that takes nothing for SEND_TIMEOUT_S (dead, cut off) is dropped, so
	 * that it never stalls the majority; it catches up when it is back. */
	struct timeval tmo = { SEND_TIMEOUT_S, 0 };
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
	if ((why = prove(s, fd, peer))) {
		sys.close(fd);
		return connect_failed(s, peer, why == fenced_why ? EACCES : 0, why);
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

	o->olen = 0;
	if (fd >= 0)
		sys.close(fd);
}

/* Sends the held frames and IOV; called with o->lock held. */
static int out_send(struct tcp_transport *s, int peer, struct iovec *iov, int cnt)
{
	struct tcp_out *o = &s->out[peer];
	struct iovec all[3];
	int n = 0, rc;

	if (o->olen)
		all[n++] = (struct iovec){ o->obuf, o->olen };
	for (int i = 0; i < cnt; i++)
		all[n++] = iov[i];
	if (!n)
		return 0;
	o->olen = 0;
	rc = send_all(o->fd, all, n);
	if (rc == -EAGAIN)
		pr_warn("node %d took nothing for %d s: dropping the connection (it catches up when "
			"it is back)", peer, SEND_TIMEOUT_S);
	else if (rc)
		pr_warn("write to node %d failed: %s", peer, strerror(-rc));
	if (rc) {
		rc = -ECONNRESET;
		out_drop(o);
	}
	return rc;
}

/* Small writes wait in the buffer for ring(); the protocol rings after
 * every group of writes. */
static int tcp_write(struct transport *t, int peer, uint64_t off, const void *buf, size_t len)
{
	struct tcp_transport *s = TCP(t);
	struct tcp_out *o = &s->out[peer];
	struct frame f = { off, (uint32_t)len, 0 };
	struct iovec iov[2] = { { &f, sizeof(f) }, { (void *)buf, len } };
	int rc = 0;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	pthread_mutex_lock(&o->lock);
	if (o->fd < 0) {
		rc = -ENOTCONN;
	} else if (o->olen + sizeof(f) + len <= OUT_BUF) {
		memcpy(o->obuf + o->olen, &f, sizeof(f));
		memcpy(o->obuf + o->olen + sizeof(f), buf, len);
		o->olen += sizeof(f) + len;
	} else {
		rc = out_send(s, peer, iov, 2);
	}
	pthread_mutex_unlock(&o->lock);
	if (!rc)
		status_add(&region_status(local_ctl(s))->sent_bytes[peer], len);
	return rc;
}

static void tcp_ring(struct transport *t, int peer)
{
	struct tcp_transport *s = TCP(t);
	struct tcp_out *o = &s->out[peer];

	pthread_mutex_lock(&o->lock);
	if (o->fd >= 0)
		out_send(s, peer, NULL, 0);
	pthread_mutex_unlock(&o->lock);
}

static void in_close(struct tcp_transport *s, struct tcp_in *in)
{
	sys.epoll_ctl(s->epfd, EPOLL_CTL_DEL, in->fd, NULL);
	sys.close(in->fd);
	in->fd = -1;
}

/* Drops a connection that failed admission; says why (rate-limited: an
 * attacker must not be able to flood the log). */
static void refuse(struct tcp_transport *s, struct tcp_in *in, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse(struct tcp_transport *s, struct tcp_in *in, const char *fmt, ...)
{
	char why[160], from[INET6_ADDRSTRLEN + 8];
	uint64_t now = now_ns();
	va_list ap;

	uint64_t refill = (now - s->refused_log_ns) / 1000000000ULL;

	if (refill) {
		s->refused_tokens = refill + s->refused_tokens > REFUSED_BURST ? REFUSED_BURST
				    : s->refused_tokens + (unsigned)refill;
		s->refused_log_ns = now;
	}
	if (s->refused_tokens) {
		s->refused_tokens--;
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		if (s->refused_quiet)
			pr_warn("refused a peer connection from %s: %s (and %u more since the last)",
				admit_addr_str((struct sockaddr *)&in->addr, from, sizeof(from)), why,
				s->refused_quiet);
		else
			pr_warn("refused a peer connection from %s: %s",
				admit_addr_str((struct sockaddr *)&in->addr, from, sizeof(from)), why);
		s->refused_quiet = 0;
	} else {
		s->refused_quiet++;
	}
	in_close(s, in);
}

/* Whether INC is the incarnation of PEER that a fence refuses; under rx. */
static int is_fenced(struct tcp_transport *s, int peer, uint64_t inc)
{
	return (s->fenced >> peer) & 1 && inc == s->fenced_inc[peer];
}

static void accept_peers(struct tcp_transport *s)
{
	uint64_t now = now_ns();

	/* Unfinished handshakes do not hold a slot for long. */
	for (int i = 0; i < MAX_IN; i++)
		if (s->in[i].fd >= 0 && s->in[i].state != IN_FRAMES &&
		    now - s->in[i].since_ns > HANDSHAKE_NS)
			refuse(s, &s->in[i], "no admission within %llu ms",
			       (unsigned long long)(HANDSHAKE_NS / 1000000));
	for (;;) {
		struct sockaddr_storage addr;
		socklen_t alen = sizeof(addr);
		int fd = sys.accept4(s->lfd, (struct sockaddr *)&addr, &alen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC), i;

		if (fd < 0)
			return;
		for (i = 0; i < MAX_IN && s->in[i].fd >= 0; i++)
			;
		/* Every slot taken: the oldest handshake under way makes room.
		 * Closing the newcomer instead let connections that never
		 * finish admission lock a restarting peer out, unlogged.  An
		 * admitted peer holds one slot (MAX_IN > APUS_MAX_NODES), so
		 * there always is one under way. */
		if (i == MAX_IN) {
			int old = -1;
			for (int k = 0; k < MAX_IN; k++)
				if (s->in[k].state != IN_FRAMES &&
				    (old < 0 || s->in[k].since_ns < s->in[old].since_ns))
					old = k;
			if (old < 0) {	/* every slot admitted: cannot be, but never index -1 */
				sys.close(fd);
				continue;
			}
			refuse(s, &s->in[old], "pushed out by a newer connection: %d are in admission",
			       MAX_IN);
			i = old;
		}
		s->in[i] = (struct tcp_in){ .fd = fd, .state = IN_HELLO, .peer = -1,
					    .since_ns = now, .addr = addr };
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = i };
		sys.epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

_Static_assert(sizeof(struct hello) == TCP_HELLO_LEN && sizeof(struct frame) == TCP_FRAME_HDR_LEN,
	       "wire sizes in transport.h");

int tcp_hello_check(const void *bytes, size_t len, int self, int nnodes)
{
	struct hello h;

	if (len != sizeof(h))
		return -EPROTO;
	memcpy(&h, bytes, sizeof(h));
	if (h.magic != HELLO_MAGIC || h.version != HELLO_VERSION || !h.incarnation)
		return -EPROTO;
	if (h.from >= nnodes || h.from == self || h.to != self)
		return -EPERM;
	return 0;
}

int tcp_frame_parse(const void *bytes, size_t size, uint64_t *off, uint32_t *len)
{
	struct frame f;

	memcpy(&f, bytes, sizeof(f));
	if (f.off > size || f.len > size - f.off)
		return -ERANGE;
	*off = f.off;
	*len = f.len;
	return 0;
}

/* A whole hello arrived: is it a configured peer at its address?  Then
 * challenge it.  Returns 0 to go on, -1 if the connection was dropped. */
static int in_hello(struct tcp_transport *s, struct tcp_in *in)
{
	const struct hello *h = &in->u.hello;
	struct challenge ch;
	int bad = tcp_hello_check(h, sizeof(*h), s->self, s->cfg->nnodes);

	if (bad == -EPROTO) {
		refuse(s, in, "not an apus peer (bad hello)");
		return -1;
	}
	if (bad) {
		refuse(s, in, "claims to be node %u writing to node %u; we are node %d of %d",
		       h->from, h->to, s->self, s->cfg->nnodes);
		return -1;
	}
	if (!admit_address_ok(s->cfg, h->from, (struct sockaddr *)&in->addr)) {
		refuse(s, in, "not node %u's address (%s)", h->from,
		       s->cfg->nodes[h->from].address);
		return -1;
	}
	/* A fenced incarnation is refused once it proved the secret
	 * (in_proof), with a welcome that tells it so. */
	memcpy(in->nonce_c, h->nonce, sizeof(in->nonce_c));
	in->inc = h->incarnation;
	in->peer = -1 - h->from;	/* claimed, not yet proven */
	if (admit_nonce(ch.nonce)) {
		refuse(s, in, "no random numbers");
		return -1;
	}
	memcpy(in->nonce_a, ch.nonce, sizeof(in->nonce_a));
	admit_mac(&s->key, "apus-tcp-accept", h->from, (uint32_t)s->self, in->nonce_c,
		  sizeof(in->nonce_c), ch.nonce, sizeof(ch.nonce), ch.mac);
	/* The socket's buffer is empty: a short send means it is broken. */
	if (sys.send(in->fd, &ch, sizeof(ch), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(ch)) {
		refuse(s, in, "hung up during the handshake");
		return -1;
	}
	in->state = IN_PROOF;
	return 0;
}

/* A whole proof arrived: admit the peer if it knows the secret. */
static int in_proof(struct tcp_transport *s, struct tcp_in *in)
{
	int peer = -1 - in->peer;
	struct welcome welcome = { HELLO_MAGIC, 0, __atomic_load_n(&s->incarnation, __ATOMIC_RELAXED) };
	int fenced;
	char from[INET6_ADDRSTRLEN + 8];

	if (admit_verify(&s->key, "apus-tcp-connect", (uint32_t)peer, (uint32_t)s->self,
			 in->nonce_a, sizeof(in->nonce_a), in->nonce_c, sizeof(in->nonce_c),
			 in->u.proof)) {
		refuse(s, in, "claims to be node %d but does not know the cluster secret", peer);
		return -1;
	}
	fenced = is_fenced(s, peer, in->inc);
	if (fenced)
		welcome.flags = WELCOME_FENCED;
	if (sys.send(in->fd, &welcome, sizeof(welcome), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(welcome)) {
		refuse(s, in, "hung up during the handshake");
		return -1;
	}
	if (fenced) {
		refuse(s, in, "node %d is fenced (told so)", peer);
		return -1;
	}
	/* A proven incarnation other than the fenced one: the node restarted
	 * (the fenced process is gone), and the new one may write again.  The
	 * fenced one's connections were closed by the fence. */
	if ((s->fenced >> peer) & 1) {
		s->fenced &= ~(1u << peer);
		s->fenced_inc[peer] = 0;
		pr_info("node %d restarted (new incarnation): fence lifted", peer);
	}
	__atomic_store_n(&s->peer_inc[peer], in->inc, __ATOMIC_RELAXED);
	/* Our connection to an earlier incarnation leads to a process that is
	 * gone, or to a copy of it restored from an image: one whose socket
	 * may never answer us (its copy of the connection stands where the
	 * image was taken).  check() drops it and says the peer restarted. */
	uint64_t reached = __atomic_load_n(&s->out[peer].incarnation, __ATOMIC_RELAXED);
	if (reached && reached != in->inc && __atomic_load_n(&s->out[peer].fd, __ATOMIC_ACQUIRE) >= 0)
		__atomic_store_n(&s->out[peer].stale, 1, __ATOMIC_RELEASE);
	/* One connection per writer: an older one from the same peer is stale. */
	for (int i = 0; i < MAX_IN; i++)
		if (&s->in[i] != in && s->in[i].fd >= 0 && s->in[i].peer == peer)
			in_close(s, &s->in[i]);
	pr_debug("node %d admitted from %s", peer,
		 admit_addr_str((struct sockaddr *)&in->addr, from, sizeof(from)));
	in->peer = peer;
	in->state = IN_FRAMES;
	return 0;
}

/* Up to WANT bytes of IN's stream into DST: from the buffer, or straight
 * from the socket for a large payload, or after one refill.  Returns bytes
 * (> 0), 0 at end of stream, -1 with errno (EAGAIN: nothing more now). */
static ssize_t in_read(struct tcp_in *in, void *dst, size_t want)
{
	ssize_t n;

	if (in->bend == in->bstart) {
		if (in->drained) {
			errno = EAGAIN;
			return -1;
		}
		if (want >= IN_BUF / 2) {
			n = sys.recv(in->fd, dst, want, MSG_DONTWAIT);
			if (n > 0 && (size_t)n < want)
				in->drained = 1;
			return n;
		}
		n = sys.recv(in->fd, in->buf, IN_BUF, MSG_DONTWAIT);
		if (n <= 0)
			return n;
		if (n < IN_BUF)
			in->drained = 1;
		in->bstart = 0;
		in->bend = (uint32_t)n;
	}
	n = (ssize_t)(in->bend - in->bstart);
	if ((size_t)n > want)
		n = (ssize_t)want;
	memcpy(dst, in->buf + in->bstart, (size_t)n);
	in->bstart += (uint32_t)n;
	return n;
}

/* Receives what IN sent; applies whole frames.  Returns frames applied. */
static int in_receive(struct tcp_transport *s, struct tcp_in *in)
{
	int applied = 0;

	for (;;) {
		char *dst;
		size_t want;

		if (in->state == IN_HELLO) {
			dst = (char *)&in->u.hello + in->got;
			want = sizeof(in->u.hello) - in->got;
		} else if (in->state == IN_PROOF) {
			dst = (char *)in->u.proof + in->got;
			want = sizeof(in->u.proof) - in->got;
		} else if (in->got < sizeof(in->u.hdr)) {
			dst = (char *)&in->u.hdr + in->got;
			want = sizeof(in->u.hdr) - in->got;
		} else {
			size_t body = in->got - sizeof(in->u.hdr);
			size_t len = in->u.hdr.len, head = len >= 8 ? len - 8 : 0;
			/* Payload straight into the region; its last word apart. */
			dst = body < head ? s->local + in->u.hdr.off + body
					  : (char *)&in->last + (body - head);
			want = body < head ? head - body : len - body;
		}
		ssize_t n = want ? in_read(in, dst, want) : 0;
		if (want && n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return applied;
			if (in->state != IN_FRAMES)
				refuse(s, in, "hung up during admission (a different cluster secret?)");
			else
				in_close(s, in);	/* the writer went away */
			return applied;
		}
		in->got += (size_t)n;
		if (in->state == IN_HELLO) {
			if (in->got < sizeof(in->u.hello))
				continue;
			in->got = 0;
			if (in_hello(s, in))
				return applied;
			continue;
		}
		if (in->state == IN_PROOF) {
			if (in->got < sizeof(in->u.proof))
				continue;
			in->got = 0;
			if (in_proof(s, in))
				return applied;
			continue;
		}
		uint64_t off;
		uint32_t len;
		if (in->got == sizeof(in->u.hdr) &&
		    tcp_frame_parse(&in->u.hdr, s->size, &off, &len)) {
			pr_err("node %d wrote outside our region; dropping it", in->peer);
			in_close(s, in);
			return applied;
		}
		/* Nothing of a refused frame lands: its payload goes straight
		 * into the region, so it is judged by its header alone. */
		if (in->got == sizeof(in->u.hdr) &&
		    !region_peer_may_write(in->peer, in->u.hdr.off, in->u.hdr.len, s->size)) {
			pr_err("node %d wrote %u bytes at offset %llu, into our control page outside "
			       "its own slots; dropping it",
			       in->peer, in->u.hdr.len, (unsigned long long)in->u.hdr.off);
			in_close(s, in);
			return applied;
		}
		if (in->got < sizeof(in->u.hdr) + in->u.hdr.len)
			continue;
		/* A guard: fence() closes the fenced incarnation's connections
		 * under rx, so none of them gets here. */
		if (is_fenced(s, in->peer, in->inc)) {
			in_close(s, in);
			return applied;
		}
		/* Whole frame: the last word (or the short write) lands last. */
		char *at = s->local + in->u.hdr.off;
		if (in->u.hdr.len >= 8)
			__atomic_store_n((uint64_t *)(void *)(at + in->u.hdr.len - 8), in->last,
					 __ATOMIC_RELEASE);
		else if (in->u.hdr.len)
			memcpy(at, &in->last, in->u.hdr.len);
		in->got = 0;
		applied++;
	}
}

/* Handles what epoll reported; the caller holds rx.  Returns frames applied. */
static int rx_events(struct tcp_transport *s, const struct epoll_event *ev, int n)
{
	int applied = 0;

	for (int i = 0; i < n; i++) {
		int k = ev[i].data.fd;

		if (k == -1) {
			accept_peers(s);
		} else if (k == -2) {
			rx_drain(s->evfd);
		} else if (s->in[k].fd >= 0) {
			s->in[k].drained = 0;
			applied += in_receive(s, &s->in[k]);
		}
	}
	return applied;
}

/* One non-blocking look at every socket: a single epoll_wait when idle. */
static int tcp_poll(struct transport *t)
{
	struct tcp_transport *s = TCP(t);
	struct epoll_event ev[POLL_EVENTS];
	int applied;

	if (pthread_mutex_trylock(&s->rx))
		return 0;	/* another thread is receiving */
	applied = rx_events(s, ev, sys.epoll_wait(s->epfd, ev, POLL_EVENTS, 0));
	pthread_mutex_unlock(&s->rx);
	if (applied)
		bell_ring(&local_ctl(s)->bell, &local_ctl(s)->sleepers);
	return applied;
}

static uint32_t tcp_bell(struct transport *t)
{
	return region_bell(local_ctl(TCP(t)));
}

/* rx_wait()'s block: epoll until something arrives, and apply it. */
static int tcp_block(void *arg, int timeout_us)
{
	struct tcp_transport *s = arg;
	struct epoll_event ev[POLL_EVENTS];

	return rx_events(s, ev, sys.epoll_wait(s->epfd, ev, POLL_EVENTS,
					   timeout_us < 1000 ? 1 : timeout_us / 1000));
}

static void tcp_wait(struct transport *t, uint32_t seen, int timeout_us)
{
	struct tcp_transport *s = TCP(t);

	if (tcp_poll(t) || tcp_bell(t) != seen)
		return;
	rx_wait(&s->rx, local_ctl(s), seen, timeout_us, tcp_block, s);
}

static void tcp_wake(struct transport *t)
{
	rx_wake(local_ctl(TCP(t)), TCP(t)->evfd);
}

/* A closed connection alone does not say whether the peer restarted or
 * only dropped us (a partition, a stall): -ENOTCONN, and the next connect
 * compares incarnations; a new one makes the check after it -ECONNRESET. */
static int tcp_check(struct transport *t, int peer)
{
	struct tcp_out *o = &TCP(t)->out[peer];
	int fd = __atomic_load_n(&o->fd, __ATOMIC_ACQUIRE);
	struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };

	if (__atomic_exchange_n(&o->restarted, 0, __ATOMIC_ACQ_REL))
		return -ECONNRESET;
	if (__atomic_exchange_n(&o->stale, 0, __ATOMIC_ACQ_REL)) {
		pthread_mutex_lock(&o->lock);
		out_drop(o);
		pthread_mutex_unlock(&o->lock);
		return -ECONNRESET;
	}
	if (fd < 0)
		return -ENOTCONN;
	/* The peer never sends on our connection: readable means it closed. */
	if (sys.poll(&p, 1, 0) == 0)
		return 0;
	pthread_mutex_lock(&o->lock);
	out_drop(o);
	pthread_mutex_unlock(&o->lock);
	return -ENOTCONN;
}

/* Closes PEER's connections into our region and refuses its incarnation
 * that runs now: the last one we learned from a proven connection, either
 * way.  Once this returns, nothing more from it lands: frames are applied
 * only under the rx lock, and its connections are closed under it.  A
 * different incarnation that proves the secret later is the node
 * restarted: it is admitted and the fence lifted (in_proof).  If we never
 * learned PEER's incarnation (it never reached us nor we it), the fence
 * refuses none in particular: it only drops handshakes under way, and the
 * first incarnation admitted lifts it, since we cannot tell the process
 * that runs now from a later one. */
static int tcp_fence(struct transport *t, int peer)
{
	struct tcp_transport *s = TCP(t);
	uint64_t inc;

	if (peer < 0 || peer >= s->cfg->nnodes || peer == s->self)
		return -EINVAL;
	tcp_wake(t);	/* shortens a receiver's epoll wait */
	pthread_mutex_lock(&s->rx);
	/* Bit and incarnation change together under rx: an admission never
	 * sees one without the other. */
	inc = __atomic_load_n(&s->peer_inc[peer], __ATOMIC_RELAXED);
	s->fenced |= 1u << peer;
	s->fenced_inc[peer] = inc;
	for (int i = 0; i < MAX_IN; i++)
		if (s->in[i].fd >= 0 && (s->in[i].peer == peer || s->in[i].peer == -1 - peer))
			in_close(s, &s->in[i]);
	pthread_mutex_unlock(&s->rx);
	if (inc)
		pr_info("node %d fenced: writes of its incarnation %016llx are refused", peer,
			(unsigned long long)inc);
	else
		pr_info("node %d fenced: its connections are closed (its incarnation is unknown: "
			"the next one admitted lifts the fence)", peer);
	return 0;
}

static void tcp_unfence(struct transport *t, int peer)
{
	struct tcp_transport *s = TCP(t);

	if (peer < 0 || peer >= s->cfg->nnodes)
		return;
	pthread_mutex_lock(&s->rx);
	if (s->fenced & (1u << peer))
		pr_info("node %d: fence lifted", peer);
	s->fenced &= ~(1u << peer);
	s->fenced_inc[peer] = 0;
	pthread_mutex_unlock(&s->rx);
}

/* Every descriptor of ours. */
static void close_fds(struct tcp_transport *s)
{
	for (int i = 0; i < APUS_MAX_NODES; i++)
		out_drop(&s->out[i]);
	for (int i = 0; i < MAX_IN; i++)
		if (s->in[i].fd >= 0)
			sys.close(s->in[i].fd);
	sys.close(s->lfd);
	sys.close(s->epfd);
	sys.close(s->evfd);
}

static void tcp_close(struct transport *t)
{
	close_fds(TCP(t));
	free(t);
}

static void tcp_forget(struct transport *t)
{
	close_fds(TCP(t));
}

/* Restored from an image: our connections are copies of ones whose other
 * ends moved on (or closed while a network lock hid it); a peer may keep
 * writing into its end and never hear from ours.  Drop them all, and come
 * back as a new incarnation: peers drop what leads to the old one. */
static void tcp_restored(struct transport *t)
{
	struct tcp_transport *s = TCP(t);

	pthread_mutex_lock(&s->rx);
	for (int i = 0; i < MAX_IN; i++)
		if (s->in[i].fd >= 0)
			in_close(s, &s->in[i]);
	__atomic_store_n(&s->incarnation, new_incarnation(), __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->rx);
	for (int i = 0; i < APUS_MAX_NODES; i++) {
		pthread_mutex_lock(&s->out[i].lock);
		out_drop(&s->out[i]);
		pthread_mutex_unlock(&s->out[i].lock);
	}
	pr_info("restored from an image: every peer connection dropped, rejoining as a new "
		"incarnation");
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
	.unfence = tcp_unfence,
	.close = tcp_close,
	.forget = tcp_forget,
	.restored = tcp_restored,
};
