/* The read family.  On the leader, bytes the server reads from a client
 * are replicated (a RECV entry) before the server sees them, and end of
 * stream becomes the connection's CLOSE.  On a backup, reads on replay
 * connections tell replay what the server has consumed.  Errors and EAGAIN
 * pass through untouched. */
#define LOG_PREFIX "shim: "
#include <errno.h>
#include <fcntl.h>

#include "common/clock.h"
#include "coordinator/input/input_clock.h"
#include "common/logger.h"
#include "coordinator/node/turns.h"
#include "shim.h"

/* Leader: what the server read of a client's socket is replicated before
 * it sees it; its end of stream is the connection's CLOSE. */
static ssize_t after_input(struct fd_slot *s, const struct iovec *iov, int iovcnt, ssize_t n)
{
	/* A zero-length read returns 0 without meaning end of stream. */
	if (n < 0 || (n == 0 && iov_total(iov, iovcnt) == 0))
		return n;
	if (n > 0)
		s->heard = 1;
	if (n == 0) {
		shim_log_close(s);
		return 0;
	}
	if (node_propose(shim_node, ENTRY_RECV, answers_flags(s), s->client.conn, iov, iovcnt,
			 (size_t)n, NULL)) {
		/* Not replicated, so the server must not act on it. */
		errno = ECONNRESET;
		return -1;
	}
	input_window_enter(node_proposed_stamp(), node_proposed_idx());
	answers_heard(s, node_proposed_stamp());
	return n;
}

/* Whether the client of FD has ended its side (its end of stream waits). */
static int client_left(int fd)
{
	char byte;

	return real.recvfrom(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT, NULL, NULL) == 0;
}

/* poll() found a replay connection readable: its bytes may be there ahead
 * of their turn (the role thread writes them into the socket early), and
 * a read out of turn is refused.  No side effects. */
int replay_fd_poll_ready(int fd, struct fd_slot *s)
{
	(void)fd;
	return node_serving(shim_node) || !node_replay(shim_node) ||
	       replay_tap_ready(node_replay(shim_node), s->replay.tap);
}

/* Whether the shim would refuse a read of client S (FD) now, though the
 * kernel has input for it: the input finds no room in the log (room_for). */
static int client_read_refused(int fd, struct fd_slot *s)
{
	if (!node_serving(shim_node) || node_input_room(shim_node, 0, !answers_flags(s)) ||
	    !(fcntl(fd, F_GETFL) & O_NONBLOCK) ||
	    /* There the read ends a session that waits too long (room_for). */
	    node_config(shim_node)->snapshot_connections == SNAPSHOT_CONNECTIONS_NONE)
		return 0;
	/* A client that left: its end of stream needs no room. */
	return !client_left(fd);
}

/* poll() found client S readable: the server is told only if its read
 * would get the input, and from then on the client counts as polled
 * (polled_waits). */
int client_fd_poll_ready(int fd, struct fd_slot *s)
{
	if (client_read_refused(fd, s))
		return 0;
	if (!s->client.polled)
		s->client.polled = 1;
	return 1;
}

#define IOV_CAP 64
#define ROOM_WAIT_US 1000
/* snapshot_connections = none: how long a client's input may wait for room
 * before its connection is ended (see room_for). */
#define ROOM_RESET_NS (1000 * 1000000ULL)

/* A client whose server polls (poll.c) takes EAGAIN on a read after poll()
 * said readable for an error on the connection (clamd drops it): its read
 * waits for room instead, as a blocking one does, where the log is freed
 * by the backups' points rather than by this server's own fork, which the
 * waiting thread could be the one to make (and not where a session that
 * waits too long must be ended: room_for). */
static int polled_waits(const struct fd_slot *s)
{
	const struct apus_config *c;

	if (!s->client.polled)
		return 0;	/* the common path: one load */
	c = node_config(shim_node);
	return c->snapshot_connections != SNAPSHOT_CONNECTIONS_NONE &&
	       (!c->snapshot_cmd[0] || !c->snapshot_leader);
}

/* Leader: 0 (errno EAGAIN) when a client's input must stay in its socket
 * for now: the log has no room and the socket does not block (a blocking
 * reader waits for room in node_propose instead). */
static int room_for(int fd, struct fd_slot *s)
{
	if (!node_serving(shim_node) || polled_waits(s) ||
	    node_input_room(shim_node, ROOM_WAIT_US, !answers_flags(s))) {
		if (s->client.room_wait_ns)
			s->client.room_wait_ns = 0;	/* no store on the common path */
		return 1;
	}
	if (!(fcntl(fd, F_GETFL) & O_NONBLOCK))
		return 1;
	/* A client that left: its end of stream needs no room (its CLOSE
	 * has the headroom), and the server must see it, or a session
	 * waiting for the log would hold it full for ever (a recovery point
	 * that waits for no connection: snapshot_connections = none). */
	if (client_left(fd))
		return 1;
	/* There the log frees only once no client is connected: a client
	 * whose input waits ends its session (nothing of it was logged, so
	 * nothing it was told is lost), and the server closes it. */
	if (node_config(shim_node)->snapshot_connections == SNAPSHOT_CONNECTIONS_NONE) {
		uint64_t now = now_ns();

		if (!s->client.room_wait_ns) {
			s->client.room_wait_ns = now;
		} else if (now - s->client.room_wait_ns > ROOM_RESET_NS) {
			pr_warn("connection %d: its input waited %llu ms for room in a full log that "
				"frees only with no client connected (snapshot_connections = none): "
				"ending it", fd, (unsigned long long)(now - s->client.room_wait_ns) / 1000000);
			s->client.room_wait_ns = 0;
			errno = ECONNRESET;
			return 0;
		}
	}
	errno = EAGAIN;
	return 0;
}

/* Copies IOV into OUT truncated to CAP bytes; returns the number of entries. */
static int iov_cap(const struct iovec *iov, int iovcnt, size_t cap, struct iovec *out)
{
	int n = 0;

	for (int i = 0; i < iovcnt && n < IOV_CAP && cap; i++) {
		out[n] = iov[i];
		if (out[n].iov_len > cap)
			out[n].iov_len = cap;
		cap -= out[n].iov_len;
		n++;
	}
	return n;
}

ssize_t read_call_real(struct read_call *c, size_t cap)
{
	struct iovec capped[IOV_CAP];
	const struct iovec *iov = c->iov;
	int iovcnt = c->iovcnt;
	ssize_t n;

	c->real_called = 1;
	if (cap < iov_total(iov, iovcnt)) {
		iovcnt = iov_cap(iov, iovcnt, cap, capped);
		iov = capped;
	}
	switch (c->family) {
	case CALL_READ:
		return real.read(c->fd, c->iov[0].iov_base, cap);
	case CALL_READV:
		return real.readv(c->fd, iov, iovcnt);
	case CALL_RECVFROM:
		return real.recvfrom(c->fd, c->iov[0].iov_base, cap, c->flags, c->addr, c->alen);
	case CALL_RECVMSG:
		c->msg->msg_iov = (struct iovec *)iov;
		c->msg->msg_iovlen = (size_t)iovcnt;
		n = real.recvmsg(c->fd, c->msg, c->flags);
		c->msg->msg_iov = (struct iovec *)c->iov;
		c->msg->msg_iovlen = (size_t)c->iovcnt;
		return n;
	}
	errno = EINVAL;
	return -1;
}

/* replay_read's view of a read call (struct replay_sock). */
static ssize_t socket_read(void *arg, size_t cap)
{
	return read_call_real(arg, cap);
}

static int socket_read_blocks(void *arg)
{
	const struct read_call *c = arg;

	return shim_read_blocks(c->fd, c->flags);
}

/* Backup: a read of a replay connection takes the turns of its entries in
 * log order (turns.h); a peek leaves them where they are. */
ssize_t replay_fd_read(struct fd_slot *s, struct read_call *c)
{
	struct replay_sock sock = { socket_read, socket_read_blocks, c, s->ep_set != 0 };
	ssize_t n;

	if (c->flags & MSG_PEEK)
		return read_call_real(c, iov_total(c->iov, c->iovcnt));
	request_order_before_replay_read();
	n = replay_read(node_replay(shim_node), s->replay.tap, c->iov, c->iovcnt, &sock);
	if (n > 0)
		s->heard = 1;
	return n;
}

/* Leader: a read of a client, served from what readahead.c read and
 * replicated ahead (or refused there to keep log order), else from the
 * socket and replicated before the server sees it. */
static ssize_t client_input(struct fd_slot *s, struct read_call *c)
{
	int peek = c->flags & MSG_PEEK;
	size_t want = iov_total(c->iov, c->iovcnt);
	ssize_t n;

	if (readahead_take(c->fd, s, c->iov, c->iovcnt, peek, &n)) {
		if (n > 0 && !peek)
			s->heard = 1;
		return n;
	}
	/* A peek leaves the bytes in the socket: they count when really read. */
	if (peek)
		return read_call_real(c, want);
	if (!room_for(c->fd, s))
		return -1;
	return after_input(s, c->iov, c->iovcnt, read_call_real(c, want));
}

/* ... around the request order (request_order.c; a peek starts no request). */
ssize_t client_fd_read(struct fd_slot *s, struct read_call *c)
{
	ssize_t n;

	if (c->flags & MSG_PEEK)
		return client_input(s, c);
	request_order_before_client_read(c->fd, c->flags);
	n = client_input(s, c);
	request_order_after_client_read(n);
	return n;
}

/* Any read of the server's: its descriptor's kind decides (fd_ops.h). */
static ssize_t shim_read(struct read_call *c)
{
	struct fd_slot *s = shim_slot(c->fd);

	if (!s || !fd_ops_of(s)->read)
		return read_call_real(c, iov_total(c->iov, c->iovcnt));
	return fd_ops_of(s)->read(s, c);
}

APUS_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct iovec iov = { buf, len };

	real_resolve();
	return shim_read(&(struct read_call){ .family = CALL_READ, .fd = fd, .iov = &iov,
					      .iovcnt = 1 });
}

APUS_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	real_resolve();
	return shim_read(&(struct read_call){ .family = CALL_READV, .fd = fd, .iov = iov,
					      .iovcnt = iovcnt });
}

APUS_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
			     socklen_t *alen)
{
	struct iovec iov = { buf, len };
	struct read_call c = { .family = CALL_RECVFROM, .fd = fd, .flags = flags, .iov = &iov,
			       .iovcnt = 1, .addr = addr, .alen = alen };
	ssize_t n;

	real_resolve();
	n = shim_read(&c);
	if (n >= 0 && !c.real_called && alen)
		*alen = 0;	/* a stream socket names no sender */
	return n;
}

APUS_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return recvfrom(fd, buf, len, flags, NULL, NULL);
}

APUS_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct read_call c = { .family = CALL_RECVMSG, .fd = fd, .flags = flags,
			       .iov = msg->msg_iov, .iovcnt = (int)msg->msg_iovlen, .msg = msg };
	ssize_t n;

	real_resolve();
	n = shim_read(&c);
	if (n >= 0 && !c.real_called) {
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	return n;
}
