/* rdma backend: the one-sided write contract on RDMA hardware (libibverbs +
 * librdmacm, RC queue pairs), also on Soft-RoCE (rxe) and siw.
 *
 * Connections: one RC queue pair per peer and direction, like tcp.
 * connect() makes our outgoing QP, through which we RDMA WRITE into the
 * peer's region; the peer's outgoing QP ends on an incoming QP here, which
 * poll() accepts.  Two QPs per pair rather than one keep the two directions'
 * life cycles apart: a restarted writer reconnects without its reader's
 * help, and fence() kills exactly the incoming side.
 *
 * The region is registered once, with remote write.  Incoming QPs exist
 * only for admitted peers; on our outgoing QPs remote access is switched
 * off after the handshake, so a peer cannot write into us through them (a
 * fenced peer keeps no way in).
 *
 * Admission rides on rdma_cm private data.  The connect request carries
 * {magic, from, to, version, nonce_c, HMAC(nonce_c)}; the acceptor checks
 * ids, the source address, the MAC and replays of nonce_c, then answers
 * {addr, rkey, nonce_a, HMAC(nonce_c, addr, rkey, nonce_a)}, which tells the
 * writer it reached a cluster member before it writes anything.  A refused
 * request gets rdma_reject and never a QP.
 *
 * Ordering: RC executes one QP's writes in order, but the bytes of one
 * write may land in any order, so write() posts [0, len-8) and then the
 * last 8 bytes as a second work request.  ring() posts a zero-length
 * WRITE_WITH_IMM (a zero-length SEND on iWARP, which has no immediate data)
 * behind the writes; it consumes a receive on the peer's incoming QP, whose
 * CQ has a completion channel, and that wakes a peer asleep in wait().
 *
 * Waiting follows tcp: poll() handles cm events and receive completions
 * without blocking; wait() lets one thread block in poll(2) on the
 * completion channel, the cm channel and an eventfd, the others sleep on
 * the doorbell futex.  Outgoing handshakes block for at most STEP_MS per
 * step inside connect(). */
#define LOG_PREFIX "rdma: "
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <openssl/crypto.h>
#include <rdma/rdma_cma.h>

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

#define HELLO_MAGIC 0x41505552u	/* "APUR" */
#define HELLO_VERSION 1
#define MAX_IN 16		/* incoming connections: peers, and stale ones on their way out */
#define RECV_DEPTH 512		/* receives per incoming QP: rings in flight before RNR back-pressure */
#define SQ_DEPTH 128		/* send queue of an outgoing QP */
#define INLINE_WANT 256		/* asked for; the device may grant less (then 64, then 0) */
#define STAGE_SIZE (64 << 10)	/* per peer, for sources outside the region */
#define STEP_MS 100		/* longest wait for one handshake step */
#define WAIT_NS (5000 * 1000000ULL)	/* longest wait for a send slot or a staged write */
#define ACK_TIMEOUT 14		/* 4.096 us * 2^14 = 67 ms per retry: a dead peer shows in ~0.5 s */
#define RNR_TIMER 12		/* 0.64 ms; rdma_cm may leave 0, which means 655 ms */
#define NONCES 64		/* accepted handshakes remembered against replay */
#define REFUSED_BURST 20	/* refusals logged at once before one a second */

#define BACKOFF_MIN_NS (10 * 1000000ULL)
#define BACKOFF_MAX_NS (1000 * 1000000ULL)

/* Connect request private data; all fields in network byte order. */
struct hello {
	uint32_t magic;
	uint8_t from, to;
	uint16_t version;
	uint8_t nonce[ADMIT_NONCE_LEN];
	uint8_t mac[ADMIT_MAC_LEN];
};

/* Accept private data: where to write.  The MAC covers the first 32 bytes
 * and the connector's nonce. */
struct welcome {
	uint64_t addr;
	uint32_t rkey;
	uint32_t pad;
	uint8_t nonce[ADMIT_NONCE_LEN];
	uint8_t mac[ADMIT_MAC_LEN];
};

#define WELCOME_SIGNED offsetof(struct welcome, mac)

_Static_assert(sizeof(struct hello) == 56, "connect private data is at most 56 bytes on IB");
_Static_assert(sizeof(struct welcome) == 64 && WELCOME_SIGNED == 32, "accept private data layout");

struct rdma_out {	/* our connection for writing into a peer's region */
	int peer;
	pthread_mutex_t connecting;	/* one connect() at a time; guards the back-off */
	pthread_mutex_t lock;		/* posting, check and tear-down */
	int up;			/* atomic; the connection fields below are valid while set */
	int reset;		/* dropped after an error: check() says so once */
	struct rdma_event_channel *ch;	/* this connection's cm events only */
	struct rdma_cm_id *id;
	struct ibv_cq *cq;	/* its send completions, polled, never armed */
	uint64_t raddr;
	uint32_t rkey;
	uint32_t max_inline;
	uint32_t depth, sig_every;
	uint64_t posted, done;	/* work request numbers: last posted, last known complete */
	int dirty;		/* written since the last ring */
	char *stage;		/* kept across connections */
	struct ibv_mr *stage_mr;
	int failing;		/* the last attempt failed (logged once) */
	int refused;		/* it failed to prove the key (logged once) */
	uint64_t backoff_ns;
	uint64_t next_try_ns;
};

struct rdma_in {	/* a peer writing into our region */
	struct rdma_cm_id *id;	/* NULL: free */
	int peer;
	uint32_t gen;		/* tells completions of a reused slot's old QP apart */
};

struct rdma_transport {
	struct transport t;
	const struct apus_config *cfg;
	int self;
	char *local;
	size_t size;
	struct admit_key key;
	struct rdma_event_channel *ech;	/* the listener and incoming connections */
	struct rdma_cm_id *listen;
	struct ibv_context *ctx;	/* owned by librdmacm */
	int iwarp;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_comp_channel *rch;
	struct ibv_cq *rcq;	/* receives of every incoming QP */
	uint32_t recv_depth, sq_depth;
	uint64_t max_msg;
	int evfd;
	struct rdma_out out[APUS_MAX_NODES];
	pthread_mutex_t rx;	/* one receiver at a time; guards everything below */
	int armed;		/* rcq will raise a channel event */
	struct rdma_in in[MAX_IN];
	uint8_t nonces[NONCES][ADMIT_NONCE_LEN];
	unsigned nnonces;
	uint32_t fenced;	/* bit per node whose writes we refuse */
	unsigned refused_tokens, refused_quiet;	/* refusals we may log, and did not */
	uint64_t refused_log_ns;
};

#define RD(t) ((struct rdma_transport *)(t))

static struct region_ctl *local_ctl(struct rdma_transport *s)
{
	return (struct region_ctl *)s->local;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : 0;
}

/* -errno from a call that failed with errno (never 0). */
static int neg_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

static int valid_peer(struct rdma_transport *s, int peer)
{
	return peer >= 0 && peer < s->cfg->nnodes && peer != s->self;
}

/* ---- tear-down -------------------------------------------------------- */

/* One connection's cm resources; the QP goes before its CQ, the id before
 * its channel. */
struct conn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
};

static void conn_destroy(struct conn *c)
{
	if (c->id) {
		if (c->id->qp)
			rdma_destroy_qp(c->id);
		rdma_destroy_id(c->id);
	}
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	memset(c, 0, sizeof(*c));
}

/* Drops O's connection.  Called with o->lock held. */
static void out_drop(struct rdma_out *o)
{
	struct conn c = { o->ch, o->id, o->cq };

	if (!o->up)
		return;
	__atomic_store_n(&o->up, 0, __ATOMIC_RELEASE);
	rdma_disconnect(o->id);	/* fails harmlessly if the peer already left */
	conn_destroy(&c);
	o->ch = NULL;
	o->id = NULL;
	o->cq = NULL;
}

/* Drops an incoming connection.  Called with s->rx held.  Every cm event
 * retrieved for its id has been acked, so rdma_destroy_id cannot block. */
static void in_destroy(struct rdma_in *in)
{
	struct rdma_cm_id *id = in->id;

	in->id = NULL;
	in->gen++;
	rdma_disconnect(id);
	if (id->qp)
		rdma_destroy_qp(id);	/* our shared CQ is not the id's: it stays */
	rdma_destroy_id(id);
}

/* Acks whatever the receive CQ's channel raised.  Called with s->rx held. */
static void drain_cq_events(struct rdma_transport *s)
{
	struct ibv_cq *cq;
	void *ctx;
	unsigned n = 0;

	while (ibv_get_cq_event(s->rch, &cq, &ctx) == 0)
		n++;
	if (n) {
		ibv_ack_cq_events(s->rcq, n);
		s->armed = 0;
	}
}

/* Frees everything S holds; safe on a partly opened S. */
static void teardown(struct rdma_transport *s)
{
	for (int i = 0; i < APUS_MAX_NODES; i++) {
		struct rdma_out *o = &s->out[i];

		pthread_mutex_lock(&o->lock);
		out_drop(o);
		pthread_mutex_unlock(&o->lock);
		if (o->stage_mr)
			ibv_dereg_mr(o->stage_mr);
		if (o->stage)
			munmap(o->stage, STAGE_SIZE);
		pthread_mutex_destroy(&o->lock);
		pthread_mutex_destroy(&o->connecting);
	}
	for (int i = 0; i < MAX_IN; i++)
		if (s->in[i].id)
			in_destroy(&s->in[i]);
	if (s->listen)
		rdma_destroy_id(s->listen);
	if (s->ech)
		rdma_destroy_event_channel(s->ech);
	if (s->rcq) {
		drain_cq_events(s);	/* ibv_destroy_cq waits for every event to be acked */
		ibv_destroy_cq(s->rcq);
	}
	if (s->rch)
		ibv_destroy_comp_channel(s->rch);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->evfd >= 0)
		sys.close(s->evfd);
	OPENSSL_cleanse(&s->key, sizeof(s->key));
	pthread_mutex_destroy(&s->rx);
	free(s);
}

/* ---- open ------------------------------------------------------------- */

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* A transport with nothing opened yet, for teardown() to free however far
 * rdma_open() gets; NULL if out of memory. */
static struct rdma_transport *rdma_alloc(const struct apus_config *cfg, int self, void *region,
					 size_t size)
{
	struct rdma_transport *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->t.ops = &transport_rdma_ops;
	s->cfg = cfg;
	s->self = self;
	s->local = region;
	s->size = size;
	s->evfd = -1;
	s->refused_tokens = REFUSED_BURST;
	s->refused_log_ns = now_ns();
	pthread_mutex_init(&s->rx, NULL);
	for (int i = 0; i < APUS_MAX_NODES; i++) {
		s->out[i].peer = i;
		pthread_mutex_init(&s->out[i].lock, NULL);
		pthread_mutex_init(&s->out[i].connecting, NULL);
	}
	return s;
}

/* The listener's cm id, bound to our address SS: its device (s->ctx) is
 * the one every connection of ours must use.  0, or -errno. */
static int open_listener(struct rdma_transport *s, const struct node_conf *me,
			 struct sockaddr_storage *ss)
{
	int one = 1;

	s->ech = rdma_create_event_channel();
	if (!s->ech || set_nonblock(s->ech->fd)) {
		int rc = neg_errno();
		pr_perror("cannot create an rdma_cm event channel");
		return rc;
	}
	if (rdma_create_id(s->ech, &s->listen, NULL, RDMA_PS_TCP)) {
		int rc = neg_errno();
		pr_perror("cannot create an rdma_cm id");
		return rc;
	}
	/* Best effort: a restarted node gets its port back at once. */
	rdma_set_option(s->listen, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one));
	if (rdma_bind_addr(s->listen, (struct sockaddr *)ss)) {
		int rc = neg_errno();
		pr_perror("cannot bind to %s:%d", me->address, me->peer_port);
		return rc;
	}
	if (!s->listen->verbs) {
		pr_err("%s is not the address of an RDMA device's interface (see ibv_devices, "
		       "rdma link)", me->address);
		return -ENODEV;
	}
	s->ctx = s->listen->verbs;
	s->iwarp = s->ctx->device->transport_type == IBV_TRANSPORT_IWARP;
	return 0;
}

/* Sizes the queues to what the device allows.  0, or -errno (-ENOSPC: a
 * device too small for us). */
static int size_queues(struct rdma_transport *s)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	int rc;

	if ((rc = ibv_query_device(s->ctx, &da)) ||
	    (rc = ibv_query_port(s->ctx, s->listen->port_num, &pa))) {
		rc = rc > 0 ? -rc : -EIO;
		pr_err("cannot query RDMA device %s: %s", ibv_get_device_name(s->ctx->device),
		       strerror(-rc));
		return rc;
	}
	s->max_msg = pa.max_msg_sz ? min_u32(pa.max_msg_sz, 1u << 30) : 1u << 30;
	s->sq_depth = min_u32(SQ_DEPTH, (uint32_t)da.max_qp_wr);
	/* Every incoming QP's receives must fit the one CQ: an overrun CQ is dead. */
	s->recv_depth = min_u32(min_u32(RECV_DEPTH, (uint32_t)da.max_qp_wr),
				(uint32_t)da.max_cqe / MAX_IN);
	if (s->recv_depth < 16 || s->sq_depth < 16 || da.max_cqe < 2 * SQ_DEPTH) {
		pr_err("RDMA device %s is too small (max_qp_wr %d, max_cqe %d)",
		       ibv_get_device_name(s->ctx->device), da.max_qp_wr, da.max_cqe);
		return -ENOSPC;
	}
	return 0;
}

/* Registers the region (SIZE bytes at REGION) for the peers' remote
 * writes, and makes the one receive CQ every incoming QP shares, with a
 * completion channel that wakes wait().  0, or -errno. */
static int register_region(struct rdma_transport *s, void *region, size_t size)
{
	int rc;

	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd) {
		rc = neg_errno();
		pr_perror("cannot allocate a protection domain");
		return rc;
	}
	s->mr = ibv_reg_mr(s->pd, region, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr) {
		rc = neg_errno();
		pr_perror("cannot register the region (%zu bytes; is `ulimit -l` large enough?)", size);
		return rc;
	}
	s->rch = ibv_create_comp_channel(s->ctx);
	if (!s->rch || set_nonblock(s->rch->fd)) {
		rc = neg_errno();
		pr_perror("cannot create a completion channel");
		return rc;
	}
	s->rcq = ibv_create_cq(s->ctx, (int)(MAX_IN * s->recv_depth), NULL, s->rch, 0);
	if (!s->rcq) {
		rc = neg_errno();
		pr_perror("cannot create the receive CQ");
		return rc;
	}
	return 0;
}

static int rdma_open(const struct apus_config *cfg, int self, void *region, size_t size,
		     struct transport **out)
{
	const struct node_conf *me = &cfg->nodes[self];
	struct rdma_transport *s;
	struct ibv_device **devs;
	struct sockaddr_storage ss;
	char err[512];
	int ndev = 0, rc;

	devs = ibv_get_device_list(&ndev);
	if (devs)
		ibv_free_device_list(devs);
	if (!devs || ndev <= 0) {
		pr_err("no RDMA device (ibv_devices lists none); use transport tcp");
		return -ENODEV;
	}
	if (!me->peer_port || node_sockaddr(me, me->peer_port, &ss, NULL)) {
		pr_err("node %d needs a numeric address and a peer_port for transport rdma", self);
		return -EINVAL;
	}
	s = rdma_alloc(cfg, self, region, size);
	if (!s)
		return -ENOMEM;
	rc = admit_key_load(me->secret_file, &s->key, err, sizeof(err));
	if (rc) {
		pr_err("%s", err);
		goto fail;
	}
	if ((rc = open_listener(s, me, &ss)) || (rc = size_queues(s)) ||
	    (rc = register_region(s, region, size)))
		goto fail;
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->evfd < 0 || rdma_listen(s->listen, 16)) {
		rc = neg_errno();
		pr_perror("cannot listen on %s:%d", me->address, me->peer_port);
		goto fail;
	}
	pr_debug("node %d listens on %s:%d (device %s, inline up to %d, %u receives per peer)", self,
		 me->address, me->peer_port, ibv_get_device_name(s->ctx->device), INLINE_WANT,
		 s->recv_depth);
	*out = &s->t;
	return 0;
fail:
	teardown(s);
	return rc;
}

/* ---- outgoing connections ---------------------------------------------- */

/* A failed attempt: logged once per outage (unless QUIET: already said
 * why), next try after a back-off.  Called with o->connecting held. */
static int connect_failed(struct rdma_transport *s, int peer, int err, int quiet)
{
	struct rdma_out *o = &s->out[peer];
	const struct node_conf *n = &s->cfg->nodes[peer];

	if (!o->failing && !quiet)
		pr_warn("node %d (%s:%d) is unreachable: %s; retrying with back-off", peer,
			n->address, n->peer_port, strerror(err));
	o->failing = 1;
	o->backoff_ns = o->backoff_ns ? o->backoff_ns * 2 : BACKOFF_MIN_NS;
	if (o->backoff_ns > BACKOFF_MAX_NS)
		o->backoff_ns = BACKOFF_MAX_NS;
	o->next_try_ns = now_ns() + o->backoff_ns;
	return -EAGAIN;
}

/* Waits up to STEP_MS for C's next cm event.  0 if it is WANT (its private
 * data copied to PD, *PDLEN bytes), else -errno. */
static int step(struct conn *c, enum rdma_cm_event_type want, void *pd, size_t *pdlen)
{
	uint64_t end = now_ns() + STEP_MS * 1000000ULL;
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	int status;

	while (rdma_get_cm_event(c->ch, &ev)) {
		uint64_t now = now_ns();
		struct pollfd p = { c->ch->fd, POLLIN, 0 };

		if (errno != EAGAIN && errno != EINTR)
			return neg_errno();
		if (now >= end)
			return -ETIMEDOUT;
		sys.poll(&p, 1, (int)((end - now + 999999) / 1000000));
	}
	type = ev->event;
	status = ev->status;
	if (type == want && pd) {
		size_t n = ev->param.conn.private_data ? ev->param.conn.private_data_len : 0;

		*pdlen = n;
		if (n)
			memcpy(pd, ev->param.conn.private_data,
			       n < sizeof(struct welcome) ? n : sizeof(struct welcome));
	}
	rdma_ack_cm_event(ev);
	if (type == want)
		return 0;
	pr_debug("handshake step got %s (status %d) instead of %s", rdma_event_str(type), status,
		 rdma_event_str(want));
	if (type == RDMA_CM_EVENT_REJECTED)
		return -ECONNREFUSED;
	if (status < 0)
		return status;
	return type == RDMA_CM_EVENT_UNREACHABLE || type == RDMA_CM_EVENT_ADDR_ERROR ||
			       type == RDMA_CM_EVENT_ROUTE_ERROR
		       ? -EHOSTUNREACH
		       : -EPROTO;
}

/* The per-peer staging buffer, for write sources outside the region.
 * Shared anonymous memory: a fork (Redis BGSAVE) never makes it
 * copy-on-write under the NIC. */
static int stage_alloc(struct rdma_transport *s, struct rdma_out *o)
{
	void *m;

	if (o->stage_mr)
		return 0;
	m = mmap(NULL, STAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return neg_errno();
	o->stage_mr = ibv_reg_mr(s->pd, m, STAGE_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!o->stage_mr) {
		int rc = neg_errno();
		munmap(m, STAGE_SIZE);
		return rc;
	}
	o->stage = m;
	return 0;
}

/* Makes C's cm id and resolves the route from SRC to PEER at DST: one
 * that must leave through the listener's device.  0, or -errno. */
static int out_resolve(struct rdma_transport *s, int peer, struct conn *c,
		       struct sockaddr_storage *src, struct sockaddr_storage *dst)
{
	uint8_t ack_timeout = ACK_TIMEOUT;
	int rc;

	c->ch = rdma_create_event_channel();
	if (!c->ch || set_nonblock(c->ch->fd) || rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP))
		return neg_errno();
	/* From our configured address: the peer admits us by it. */
	if (rdma_resolve_addr(c->id, (struct sockaddr *)src, (struct sockaddr *)dst, STEP_MS))
		return neg_errno();
	if ((rc = step(c, RDMA_CM_EVENT_ADDR_RESOLVED, NULL, NULL)))
		return rc;
	if (c->id->verbs != s->ctx) {
		/* Our region is registered on the listener's device only. */
		pr_err("the route to node %d leaves through RDMA device %s, not %s", peer,
		       ibv_get_device_name(c->id->verbs->device), ibv_get_device_name(s->ctx->device));
		return -EXDEV;
	}
	/* Best effort (IB/RoCE only): notice a dead peer in ~0.5 s, not seconds. */
	rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
			sizeof(ack_timeout));
	if (rdma_resolve_route(c->id, STEP_MS))
		return neg_errno();
	return step(c, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, NULL);
}

/* C's send CQ and QP, with as much inline data as the device grants
 * (QA: what it granted).  0, or -errno. */
static int out_create_qp(struct rdma_transport *s, struct conn *c, struct ibv_qp_init_attr *qa)
{
	static const uint32_t inline_try[] = { INLINE_WANT, 64, 0 };

	c->cq = ibv_create_cq(s->ctx, 2 * (int)s->sq_depth, NULL, NULL, 0);
	if (!c->cq)
		return neg_errno();
	for (size_t i = 0; i < sizeof(inline_try) / sizeof(inline_try[0]) && !c->id->qp; i++) {
		memset(qa, 0, sizeof(*qa));
		qa->send_cq = c->cq;
		qa->recv_cq = c->cq;
		qa->qp_type = IBV_QPT_RC;
		qa->sq_sig_all = 0;
		qa->cap.max_send_wr = s->sq_depth;
		qa->cap.max_recv_wr = 1;	/* never used: the peer sends us nothing here */
		qa->cap.max_send_sge = 1;
		qa->cap.max_recv_sge = 1;
		qa->cap.max_inline_data = inline_try[i];
		if (rdma_create_qp(c->id, s->pd, qa))
			pr_debug("no QP with %u bytes inline: %s", inline_try[i], strerror(errno));
	}
	if (!c->id->qp)
		return neg_errno();
	return 0;
}

/* Asks PEER to accept C, with our hello H (a fresh nonce, MACed with the
 * cluster key).  0, or -errno. */
static int out_send_hello(struct rdma_transport *s, int peer, struct conn *c, struct hello *h)
{
	int rc;

	memset(h, 0, sizeof(*h));
	h->magic = htonl(HELLO_MAGIC);
	h->from = (uint8_t)s->self;
	h->to = (uint8_t)peer;
	h->version = htons(HELLO_VERSION);
	if ((rc = admit_nonce(h->nonce)))
		return rc;
	admit_mac(&s->key, "apus-rdma-connect", (uint32_t)s->self, (uint32_t)peer, h->nonce,
		  ADMIT_NONCE_LEN, NULL, 0, h->mac);
	struct rdma_conn_param cp = {
		.private_data = h,
		.private_data_len = sizeof(*h),
		.responder_resources = 0,	/* we never read remotely */
		.initiator_depth = 0,
		.retry_count = 7,
		.rnr_retry_count = 7,	/* a peer short of receives slows us, never fails us */
	};
	if (rdma_connect(c->id, &cp))
		return neg_errno();
	return 0;
}

/* Drops C, established but not to be used (ERR: why), as a failed attempt
 * whose cause was logged already. */
static int out_abandon(struct rdma_transport *s, int peer, struct conn *c, int err)
{
	rdma_disconnect(c->id);
	conn_destroy(c);
	return connect_failed(s, peer, err, 1);
}

/* Makes C, established with a peer that answered W, PEER's connection:
 * QA says what its QP was granted. */
static void out_up(struct rdma_transport *s, int peer, struct conn *c, const struct welcome *w,
		   const struct ibv_qp_init_attr *qa)
{
	struct rdma_out *o = &s->out[peer];

	pthread_mutex_lock(&o->lock);
	o->ch = c->ch;
	o->id = c->id;
	o->cq = c->cq;
	o->raddr = be64toh(w->addr);
	o->rkey = ntohl(w->rkey);
	o->max_inline = qa->cap.max_inline_data;
	o->depth = min_u32(qa->cap.max_send_wr, s->sq_depth);
	o->sig_every = o->depth / 4 ? o->depth / 4 : 1;
	o->posted = 0;
	o->done = 0;
	o->dirty = 0;
	o->reset = 0;
	/* Pairs with the acquire loads in connect() and connected(). */
	__atomic_store_n(&o->up, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&o->lock);
	if (o->failing)
		pr_info("node %d is reachable again", peer);
	o->failing = 0;
	o->refused = 0;
	o->backoff_ns = 0;
	pr_debug("connected to node %d (inline up to %u bytes, %u send slots)", peer, o->max_inline,
		 o->depth);
}

/* One handshake with PEER.  Called with o->connecting held. */
static int out_open(struct rdma_transport *s, int peer)
{
	const struct node_conf *n = &s->cfg->nodes[peer];
	struct rdma_out *o = &s->out[peer];
	struct sockaddr_storage src, dst;
	struct ibv_qp_init_attr qa;
	struct conn c = { 0 };
	struct hello h;
	struct welcome w;
	size_t wlen = 0;
	int rc;

	if (node_sockaddr(&s->cfg->nodes[s->self], 0, &src, NULL) ||
	    node_sockaddr(n, n->peer_port, &dst, NULL))
		return -EINVAL;
	if ((rc = out_resolve(s, peer, &c, &src, &dst)) || (rc = out_create_qp(s, &c, &qa)) ||
	    (rc = out_send_hello(s, peer, &c, &h)))
		goto fail;
	memset(&w, 0, sizeof(w));
	if ((rc = step(&c, RDMA_CM_EVENT_ESTABLISHED, &w, &wlen)))
		goto fail;
	if (wlen < sizeof(w) ||
	    admit_verify(&s->key, "apus-rdma-accept", (uint32_t)s->self, (uint32_t)peer, h.nonce,
			 ADMIT_NONCE_LEN, &w, WELCOME_SIGNED, w.mac)) {
		if (!o->refused)
			pr_err("node %d failed to prove the cluster secret; refusing it", peer);
		o->refused = 1;
		return out_abandon(s, peer, &c, EACCES);
	}
	/* Nothing may write into us through this QP (rdma_cm enabled remote
	 * write on it); incoming writes belong on admitted incoming QPs only. */
	struct ibv_qp_attr noaccess = { .qp_access_flags = 0 };
	if ((rc = ibv_modify_qp(c.id->qp, &noaccess, IBV_QP_ACCESS_FLAGS)))
		pr_debug("cannot switch off remote access on the QP to node %d: %s", peer,
			 strerror(rc));
	if ((rc = stage_alloc(s, o))) {
		pr_err("cannot set up a staging buffer for node %d: %s", peer, strerror(-rc));
		return out_abandon(s, peer, &c, -rc);
	}
	out_up(s, peer, &c, &w, &qa);
	return 0;
fail:
	conn_destroy(&c);
	return connect_failed(s, peer, -rc, 0);
}

static int rdma_connect_peer(struct transport *t, int peer)
{
	struct rdma_transport *s = RD(t);
	struct rdma_out *o;
	int saved = errno, rc;

	if (!valid_peer(s, peer))
		return -EINVAL;
	o = &s->out[peer];
	if (__atomic_load_n(&o->up, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&o->connecting);
	if (__atomic_load_n(&o->up, __ATOMIC_ACQUIRE))
		rc = 0;
	else if (o->failing && now_ns() < o->next_try_ns)
		rc = -EAGAIN;
	else
		rc = out_open(s, peer);
	pthread_mutex_unlock(&o->connecting);
	errno = saved;
	return rc;
}

static int rdma_connected(struct transport *t, int peer)
{
	return valid_peer(RD(t), peer) && __atomic_load_n(&RD(t)->out[peer].up, __ATOMIC_ACQUIRE);
}

/* Whether O's connection was torn down from the far side (its cm events).
 * Called with o->lock held, O up. */
static int out_gone(struct rdma_out *o)
{
	struct rdma_cm_event *ev;
	int gone = 0;

	while (rdma_get_cm_event(o->ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;

		rdma_ack_cm_event(ev);
		if (type != RDMA_CM_EVENT_TIMEWAIT_EXIT && type != RDMA_CM_EVENT_ADDR_CHANGE) {
			pr_debug("node %d: %s", o->peer, rdma_event_str(type));
			gone = 1;
		}
	}
	return gone;
}

/* Takes the send completions there are: how many, or -ECONNRESET after an error
 * completion (logged).  Called with o->lock held, O up. */
static int reap_some(struct rdma_out *o)
{
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(o->cq, 16, wc);

	if (n < 0) {
		pr_warn("node %d: polling the send CQ failed; dropping the connection", o->peer);
		return -ECONNRESET;
	}
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			pr_warn("write to node %d failed: %s; dropping the connection", o->peer,
				ibv_wc_status_str(wc[i].status));
			return -ECONNRESET;
		}
		/* Completions come in posting order: a signaled one implies
		 * every unsignaled one before it. */
		if (wc[i].wr_id > o->done)
			o->done = wc[i].wr_id;
	}
	return n;
}

/* Reaps until work request UNTIL completed and a send slot is free: spins
 * briefly, then naps; gives up after WAIT_NS or when the peer left.
 * Called with o->lock held, O up. */
static int reap(struct rdma_out *o, uint64_t until)
{
	uint64_t deadline = 0;
	unsigned idle = 0;

	for (;;) {
		int n = reap_some(o);

		if (n < 0)
			return n;
		if (o->done >= until && o->posted - o->done < o->depth)
			return 0;
		if (n)
			continue;
		if (++idle < 256) {
			cpu_relax();
			continue;
		}
		if (!deadline)
			deadline = now_ns() + WAIT_NS;
		if (now_ns() > deadline) {
			pr_warn("writes to node %d stalled for %llu ms; dropping the connection", o->peer,
				WAIT_NS / 1000000ULL);
			return -ETIMEDOUT;
		}
		if (out_gone(o))
			return -ECONNRESET;
		struct timespec nap = { 0, 20000 };
		nanosleep(&nap, NULL);
	}
}

/* Posts WR as the next work request.  Unsignaled except every sig_every-th
 * (any depth consecutive requests then hold a signaled one, so reap() can
 * always free a slot), when the queue is three quarters full, or when
 * FORCE asks for its completion.  Called with o->lock held, O up. */
static int post(struct rdma_out *o, struct ibv_send_wr *wr, int force)
{
	struct ibv_send_wr *bad;
	uint64_t seq;
	int rc = reap(o, 0);

	if (rc)
		return rc;
	seq = o->posted + 1;
	wr->wr_id = seq;
	if (force || seq % o->sig_every == 0 || seq - o->done >= o->depth - o->sig_every)
		wr->send_flags |= IBV_SEND_SIGNALED;
	rc = ibv_post_send(o->id->qp, wr, &bad);
	if (rc) {
		pr_warn("posting a write to node %d failed: %s; dropping the connection", o->peer,
			strerror(rc > 0 ? rc : EIO));
		return -ECONNRESET;
	}
	o->posted = seq;
	return 0;
}

static int post_write(struct rdma_out *o, uint64_t roff, const void *src, uint32_t len,
		      uint32_t lkey, int flags, int force)
{
	struct ibv_sge sge = { (uintptr_t)src, len, lkey };
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = (unsigned)flags;
	wr.wr.rdma.remote_addr = o->raddr + roff;
	wr.wr.rdma.rkey = o->rkey;
	return post(o, &wr, force);
}

static int in_region(struct rdma_transport *s, const char *p, size_t len)
{
	uintptr_t a = (uintptr_t)p, base = (uintptr_t)s->local;

	return a >= base && len <= s->size && a - base <= s->size - len;
}

/* Posts writes of SRC[0, LEN) to offset ROFF of the peer's region, in
 * order.  Called with o->lock held, O up. */
static int put(struct rdma_transport *s, struct rdma_out *o, uint64_t roff, const char *src,
	       size_t len)
{
	int rc = 0;

	if (len <= o->max_inline)	/* copied at posting: no MR, no wait */
		return post_write(o, roff, src, (uint32_t)len, 0, IBV_SEND_INLINE, 0);
	if (in_region(s, src, len)) {
		while (len && !rc) {
			size_t n = len < s->max_msg ? len : s->max_msg;

			rc = post_write(o, roff, src, (uint32_t)n, s->mr->lkey, 0, 0);
			roff += n;
			src += n;
			len -= n;
		}
		return rc;
	}
	/* Outside the region (a stack word, say): through the staging buffer,
	 * waiting until the NIC has read it before it is reused. */
	while (len && !rc) {
		size_t n = len < STAGE_SIZE ? len : STAGE_SIZE;

		memcpy(o->stage, src, n);
		rc = post_write(o, roff, o->stage, (uint32_t)n, o->stage_mr->lkey, 0, 1);
		if (!rc)
			rc = reap(o, o->posted);
		roff += n;
		src += n;
		len -= n;
	}
	return rc;
}

static int rdma_write(struct transport *t, int peer, uint64_t off, const void *buf, size_t len)
{
	struct rdma_transport *s = RD(t);
	struct rdma_out *o;
	const char *p = buf;
	int saved = errno, rc = 0;

	if (!valid_peer(s, peer) || off > s->size || len > s->size - off)
		return -EINVAL;
	o = &s->out[peer];
	pthread_mutex_lock(&o->lock);
	if (!o->up) {
		rc = -ENOTCONN;
	} else if (len) {
		/* The last word is a second request: RC executes it after the
		 * first, so a reader that sees it sees the rest. */
		if (len > 8)
			rc = put(s, o, off, p, len - 8);
		if (!rc)
			rc = len > 8 ? put(s, o, off + len - 8, p + len - 8, 8) : put(s, o, off, p, len);
		if (rc) {
			out_drop(o);
			o->reset = 1;
			rc = -ECONNRESET;
		} else {
			o->dirty = 1;
			status_add(&region_status(local_ctl(s))->sent_bytes[peer], len);
		}
	}
	pthread_mutex_unlock(&o->lock);
	errno = saved;
	return rc;
}

static void rdma_ring(struct transport *t, int peer)
{
	struct rdma_transport *s = RD(t);
	struct rdma_out *o;
	struct ibv_send_wr wr;
	int saved = errno;

	if (!valid_peer(s, peer))
		return;
	o = &s->out[peer];
	pthread_mutex_lock(&o->lock);
	/* Without new writes since the last ring the peer has nothing to
	 * wake up for; skipping saves its receive slots. */
	if (o->up && o->dirty) {
		memset(&wr, 0, sizeof(wr));
		wr.num_sge = 0;
		if (s->iwarp) {
			wr.opcode = IBV_WR_SEND;
		} else {
			wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr.imm_data = htonl((uint32_t)s->self);
			wr.wr.rdma.remote_addr = o->raddr;
			wr.wr.rdma.rkey = o->rkey;
		}
		if (post(o, &wr, 0)) {
			out_drop(o);
			o->reset = 1;
		} else {
			o->dirty = 0;
		}
	}
	pthread_mutex_unlock(&o->lock);
	errno = saved;
}

static int rdma_check(struct transport *t, int peer)
{
	struct rdma_transport *s = RD(t);
	struct rdma_out *o;
	int rc = 0;

	if (!valid_peer(s, peer))
		return -EINVAL;
	o = &s->out[peer];
	pthread_mutex_lock(&o->lock);
	if (!o->up) {
		rc = o->reset ? -ECONNRESET : -ENOTCONN;
		o->reset = 0;
	} else if (out_gone(o) || reap_some(o) < 0) {
		out_drop(o);
		rc = -ECONNRESET;
	}
	pthread_mutex_unlock(&o->lock);
	return rc;
}

/* ---- incoming connections ---------------------------------------------- */

static uint64_t in_wr_id(struct rdma_transport *s, struct rdma_in *in)
{
	return (uint64_t)in->gen << 8 | (uint64_t)(in - s->in);
}

static int post_recvs(struct rdma_transport *s, struct rdma_in *in, uint32_t n)
{
	/* No buffer: an immediate (or iWARP's empty SEND) carries no data
	 * into it. */
	struct ibv_recv_wr wr = { .wr_id = in_wr_id(s, in), .sg_list = NULL, .num_sge = 0 }, *bad;

	for (uint32_t i = 0; i < n; i++) {
		int rc = ibv_post_recv(in->id->qp, &wr, &bad);
		if (rc)
			return rc > 0 ? -rc : -EIO;
	}
	return 0;
}

static int nonce_seen(struct rdma_transport *s, const uint8_t *nonce)
{
	unsigned n = s->nnonces < NONCES ? s->nnonces : NONCES;

	for (unsigned i = 0; i < n; i++)
		if (!CRYPTO_memcmp(s->nonces[i], nonce, ADMIT_NONCE_LEN))
			return 1;
	return 0;
}

/* Gives the admitted node FROM a QP in our region and accepts.  0 or -errno. */
static int in_accept(struct rdma_transport *s, struct rdma_in *in, struct rdma_cm_id *id,
		     const struct hello *h)
{
	struct ibv_qp_init_attr qa;
	struct welcome w;
	int rc;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = s->rcq;	/* nothing is ever sent on it */
	qa.recv_cq = s->rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 1;
	qa.cap.max_recv_wr = s->recv_depth;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, s->pd, &qa))
		return neg_errno();
	in->id = id;
	in->peer = h->from;
	id->context = in;
	if ((rc = post_recvs(s, in, s->recv_depth)))
		return rc;
	memset(&w, 0, sizeof(w));
	w.addr = htobe64((uint64_t)(uintptr_t)s->local);
	w.rkey = htonl(s->mr->rkey);
	if ((rc = admit_nonce(w.nonce)))
		return rc;
	admit_mac(&s->key, "apus-rdma-accept", h->from, h->to, h->nonce, ADMIT_NONCE_LEN, &w,
		  WELCOME_SIGNED, w.mac);
	struct rdma_conn_param cp = {
		.private_data = &w,
		.private_data_len = sizeof(w),
		.responder_resources = 0,
		.initiator_depth = 0,
		.rnr_retry_count = 7,
	};
	if (rdma_accept(id, &cp))
		return neg_errno();
	if (!s->iwarp) {
		/* Best effort: a writer that ran us out of receives retries
		 * after 0.64 ms, not after up to 655 ms. */
		struct ibv_qp_attr ra = { .min_rnr_timer = RNR_TIMER };
		if ((rc = ibv_modify_qp(id->qp, &ra, IBV_QP_MIN_RNR_TIMER)))
			pr_debug("cannot shorten the RNR timer: %s", strerror(rc));
	}
	return 0;
}

/* Logs a refusal: a burst, then one a second (a stranger retrying in a
 * loop must not flood the server's log).  Called with s->rx held. */
static void log_refusal(struct rdma_transport *s, const char *addr, const char *why)
{
	uint64_t now = now_ns(), refill = (now - s->refused_log_ns) / 1000000000ULL;

	if (refill) {
		s->refused_tokens = refill + s->refused_tokens > REFUSED_BURST
					    ? REFUSED_BURST
					    : s->refused_tokens + (unsigned)refill;
		s->refused_log_ns = now;
	}
	if (!s->refused_tokens) {
		s->refused_quiet++;
		return;
	}
	s->refused_tokens--;
	if (s->refused_quiet)
		pr_warn("refused a peer connection from %s: %s (and %u more since the last)", addr,
			why, s->refused_quiet);
	else
		pr_warn("refused a peer connection from %s: %s", addr, why);
	s->refused_quiet = 0;
}

/* A connection request (its private data PD of PDLEN bytes): admitted and
 * accepted, or rejected with one log line.  Called with s->rx held. */
static void on_request(struct rdma_transport *s, struct rdma_cm_id *id, const void *pd,
		       size_t pdlen)
{
	const struct sockaddr *sa = rdma_get_peer_addr(id);
	char addr[INET6_ADDRSTRLEN + 16], why[96] = "";
	struct rdma_in *in = NULL;
	struct hello h;
	int rc;

	admit_addr_str(sa, addr, sizeof(addr));
	memset(&h, 0, sizeof(h));
	if (pdlen >= sizeof(h))
		memcpy(&h, pd, sizeof(h));
	if (pdlen < sizeof(h) || ntohl(h.magic) != HELLO_MAGIC || ntohs(h.version) != HELLO_VERSION)
		snprintf(why, sizeof(why), "not an apus handshake");
	else if (h.from >= s->cfg->nnodes || h.from == s->self)
		snprintf(why, sizeof(why), "it claims to be node %d, not a peer", h.from);
	else if (h.to != s->self)
		snprintf(why, sizeof(why), "it is meant for node %d", h.to);
	else if (!admit_address_ok(s->cfg, h.from, sa))
		snprintf(why, sizeof(why), "not node %d's address", h.from);
	else if (admit_verify(&s->key, "apus-rdma-connect", h.from, h.to, h.nonce, ADMIT_NONCE_LEN,
			      NULL, 0, h.mac))
		snprintf(why, sizeof(why), "wrong cluster secret");
	else if (nonce_seen(s, h.nonce))
		snprintf(why, sizeof(why), "a replayed handshake");
	else if (s->fenced & (1u << h.from))
		snprintf(why, sizeof(why), "node %d is fenced", h.from);
	if (!why[0]) {
		for (int i = 0; i < MAX_IN && !in; i++)
			if (!s->in[i].id)
				in = &s->in[i];
		if (!in)
			snprintf(why, sizeof(why), "no free connection slot");
		else if ((rc = in_accept(s, in, id, &h)))
			snprintf(why, sizeof(why), "cannot set up its queue pair: %s", strerror(-rc));
	}
	if (why[0]) {
		log_refusal(s, addr, why);
		if (in && in->id == id) {
			rdma_destroy_qp(id);
			in->id = NULL;
			in->gen++;
		}
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	memcpy(s->nonces[s->nnonces++ % NONCES], h.nonce, ADMIT_NONCE_LEN);
	/* A node has one outgoing connection to us: an older one is a dead
	 * incarnation's (it may never say goodbye). */
	for (int i = 0; i < MAX_IN; i++)
		if (&s->in[i] != in && s->in[i].id && s->in[i].peer == h.from)
			in_destroy(&s->in[i]);
	pr_info("accepted node %d's connection from %s", h.from, addr);
}

/* Handles the cm events of the listener and the incoming connections.
 * Called with s->rx held.  Returns how many. */
static int cm_events(struct rdma_transport *s)
{
	struct rdma_cm_event *ev;
	int handled = 0;

	while (rdma_get_cm_event(s->ech, &ev) == 0) {
		struct rdma_cm_id *id = ev->id;
		enum rdma_cm_event_type type = ev->event;
		uint8_t pd[sizeof(struct hello)];
		size_t pdlen = 0;

		if (type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data) {
			pdlen = ev->param.conn.private_data_len;
			memcpy(pd, ev->param.conn.private_data, pdlen < sizeof(pd) ? pdlen : sizeof(pd));
		}
		/* Acked before acting: rdma_destroy_id waits for its events' acks. */
		rdma_ack_cm_event(ev);
		handled++;
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			on_request(s, id, pd, pdlen);
			continue;
		}
		if (id == s->listen) {
			if (type == RDMA_CM_EVENT_DEVICE_REMOVAL)
				pr_err("RDMA device %s went away: no peer can reach this node",
				       ibv_get_device_name(s->ctx->device));
			continue;
		}
		struct rdma_in *in = id->context;
		if (!in || in < s->in || in >= s->in + MAX_IN || in->id != id)
			continue;
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		case RDMA_CM_EVENT_ADDR_CHANGE:
			break;
		default:	/* disconnected, failed, or its device left */
			pr_info("node %d disconnected (%s)", in->peer, rdma_event_str(type));
			in_destroy(in);
		}
	}
	return handled;
}

/* Receive completions: each successful one is a ring.  Called with s->rx held. */
static int recv_completions(struct rdma_transport *s)
{
	struct ibv_wc wc[32];
	int rings = 0, n;

	while ((n = ibv_poll_cq(s->rcq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			unsigned slot = (unsigned)(wc[i].wr_id & 0xff);
			struct rdma_in *in = &s->in[slot < MAX_IN ? slot : 0];

			if (slot >= MAX_IN || !in->id || in_wr_id(s, in) != wc[i].wr_id)
				continue;	/* a connection gone since */
			if (wc[i].status != IBV_WC_SUCCESS)
				continue;	/* flushed: the connection is going away */
			rings++;
			if (post_recvs(s, in, 1))
				pr_debug("cannot re-post a receive for node %d", in->peer);
		}
	}
	return rings;
}

/* Called with s->rx held. */
static int poll_locked(struct rdma_transport *s)
{
	int handled = cm_events(s), rings = recv_completions(s);

	if (rings)
		bell_ring(&local_ctl(s)->bell, &local_ctl(s)->sleepers);
	return handled + rings;
}

static int rdma_poll(struct transport *t)
{
	struct rdma_transport *s = RD(t);
	int saved = errno, n;

	if (pthread_mutex_trylock(&s->rx))
		return 0;	/* another thread is receiving */
	n = poll_locked(s);
	pthread_mutex_unlock(&s->rx);
	errno = saved;
	return n;
}

static uint32_t rdma_bell(struct transport *t)
{
	return region_bell(local_ctl(RD(t)));
}

/* rx_wait()'s block: arm the receive CQ, then sleep in poll(2) on its
 * channel, the cm channel and the eventfd until something happens. */
static int rdma_block(void *arg, int timeout_us)
{
	struct rdma_transport *s = arg;
	int got = poll_locked(s);

	if (!got && !s->armed) {
		/* Armed, then polled again: a completion that came before the
		 * arming is found now, any later one raises a channel event. */
		if (ibv_req_notify_cq(s->rcq, 0) == 0)
			s->armed = 1;
		got = poll_locked(s);
	}
	if (!got) {
		struct pollfd p[3] = {
			{ s->rch->fd, POLLIN, 0 }, { s->ech->fd, POLLIN, 0 }, { s->evfd, POLLIN, 0 }
		};
		sys.poll(p, 3, timeout_us < 1000 ? 1 : timeout_us / 1000);
		if (p[0].revents)
			drain_cq_events(s);
		rx_drain(s->evfd);
		got = poll_locked(s);
	}
	return got;
}

static void rdma_wait(struct transport *t, uint32_t seen, int timeout_us)
{
	struct rdma_transport *s = RD(t);
	int saved = errno;

	if (!rdma_poll(t) && rdma_bell(t) == seen)
		rx_wait(&s->rx, local_ctl(s), seen, timeout_us, rdma_block, s);
	errno = saved;
}

static void rdma_wake(struct transport *t)
{
	int saved = errno;

	rx_wake(local_ctl(RD(t)), RD(t)->evfd);
	errno = saved;
}

/* Moves PEER's incoming QPs to the error state (no write of theirs lands
 * after that), disconnects them, and refuses PEER from now on. */
static int rdma_fence(struct transport *t, int peer)
{
	struct rdma_transport *s = RD(t);
	int n = 0;

	if (!valid_peer(s, peer))
		return -EINVAL;
	/* The receiving thread may be asleep in poll(2) holding rx: wake it. */
	rx_kick(s->evfd);
	pthread_mutex_lock(&s->rx);
	s->fenced |= 1u << peer;
	for (int i = 0; i < MAX_IN; i++) {
		struct rdma_in *in = &s->in[i];
		struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
		int rc;

		if (!in->id || in->peer != peer)
			continue;
		if (in->id->qp && (rc = ibv_modify_qp(in->id->qp, &err, IBV_QP_STATE)))
			pr_err("cannot move node %d's queue pair to the error state: %s", peer,
			       strerror(rc));
		in_destroy(in);	/* destroying the QP stops it in any case */
		n++;
	}
	pthread_mutex_unlock(&s->rx);
	pr_info("fenced node %d (%d connection%s closed): its writes are refused from now on", peer,
		n, n == 1 ? "" : "s");
	return 0;
}

static void rdma_unfence(struct transport *t, int peer)
{
	struct rdma_transport *s = RD(t);

	if (peer < 0 || peer >= APUS_MAX_NODES)
		return;
	pthread_mutex_lock(&s->rx);
	if (s->fenced & (1u << peer))
		pr_info("node %d: fence lifted", peer);
	s->fenced &= ~(1u << peer);
	pthread_mutex_unlock(&s->rx);
}

static void rdma_close(struct transport *t)
{
	teardown(RD(t));
}

const struct transport_ops transport_rdma_ops = {
	.name = "rdma",
	.open = rdma_open,
	.connect = rdma_connect_peer,
	.connected = rdma_connected,
	.check = rdma_check,
	.write = rdma_write,
	.ring = rdma_ring,
	.poll = rdma_poll,
	.bell = rdma_bell,
	.wait = rdma_wait,
	.wake = rdma_wake,
	.fence = rdma_fence,
	.unfence = rdma_unfence,
	.close = rdma_close,
};
