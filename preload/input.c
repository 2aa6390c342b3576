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

static ssize_t after_input(struct fd_slot *s, const struct iovec *iov, int iovcnt, ssize_t n)
{
	/* A zero-length read returns 0 without meaning end of stream. */
	if (n < 0 || (n == 0 && iov_total(iov, iovcnt) == 0))
		return n;
	if (n > 0)
		s->heard = 1;
	if (s->kind == FD_REPLAY) {
		replay_tap_read(node_replay(shim_node), s->tap, n);
		return n;
	}
	if (n == 0) {
		shim_log_close(s);
		return 0;
	}
	if (node_propose(shim_node, ENTRY_RECV, answers_flags(s), s->conn, iov, iovcnt,
			 (size_t)n, NULL)) {
		/* Not replicated, so the server must not act on it. */
		errno = ECONNRESET;
		return -1;
	}
	input_window_enter(node_proposed_stamp(), node_proposed_idx());
	answers_heard(s, node_proposed_stamp());
	return n;
}

/* Backup: how much of a replay connection the server may read now; 0 sets
 * EAGAIN (not its turn: the bytes stay in the socket for later).  A
 * server that does not watch the connection with epoll (a thread per
 * connection, poll()) waits for the turn here, briefly if the read would
 * not block: its poll() says readable while bytes of a later turn sit in
 * the socket. */
static size_t gate(int fd, struct fd_slot *s, size_t want, int flags)
{
	size_t cap;

	if (s->kind != FD_REPLAY || !want)
		return want;
	cap = replay_gate(node_replay(shim_node), s->tap, want);
	if (!cap && !s->ep_set)
		cap = replay_gate_wait(node_replay(shim_node), s->tap, want,
				       shim_read_blocks(fd, flags));	/* or REPLAY_GATE_HELD */
	if (!cap)
		errno = EAGAIN;
	return cap;
}

/* Whether the client of FD has ended its side (its end of stream waits). */
static int client_left(int fd)
{
	char byte;

	return real.recvfrom(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT, NULL, NULL) == 0;
}

/* Whether the shim would refuse a read of S (FD) now, though the kernel
 * has input for it: a backup's replay connection out of turn, or a
 * leader's client whose input finds no room in the log (room_for).  No
 * side effects: poll() asks it (poll.c). */
int input_refused_now(int fd, struct fd_slot *s)
{
	if (s->kind == FD_REPLAY)
		return !node_serving(shim_node) && node_replay(shim_node) &&
		       !replay_tap_ready(node_replay(shim_node), s->tap);
	if (s->kind != FD_CLIENT || !node_serving(shim_node) ||
	    node_input_room(shim_node, 0, !answers_flags(s)) ||
	    !(fcntl(fd, F_GETFL) & O_NONBLOCK) ||
	    /* There the read ends a session that waits too long (room_for). */
	    node_config(shim_node)->snapshot_connections == SNAPSHOT_CONNECTIONS_NONE)
		return 0;
	/* A client that left: its end of stream needs no room. */
	return !client_left(fd);
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

	if (!s->polled)
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
	if (s->kind != FD_CLIENT || !node_serving(shim_node) || polled_waits(s) ||
	    node_input_room(shim_node, ROOM_WAIT_US, !answers_flags(s))) {
		if (s->room_wait_ns)
			s->room_wait_ns = 0;	/* no store on the common path */
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

		if (!s->room_wait_ns) {
			s->room_wait_ns = now;
		} else if (now - s->room_wait_ns > ROOM_RESET_NS) {
			pr_warn("connection %d: its input waited %llu ms for room in a full log that "
				"frees only with no client connected (snapshot_connections = none): "
				"ending it", fd, (unsigned long long)(now - s->room_wait_ns) / 1000000);
			s->room_wait_ns = 0;
			errno = ECONNRESET;
			return 0;
		}
	}
	errno = EAGAIN;
	return 0;
}

/* Leader: a read served from what readahead.c read and replicated ahead
 * (or refused to keep log order); backup: from a held replay turn.
 * Returns 1 with *RET set if so. */
static int served_here(int fd, struct fd_slot *s, const struct iovec *iov, int iovcnt, int flags,
		       ssize_t *ret)
{
	if (s->kind == FD_REPLAY) {
		/* Backup: a turn held for the server (turns.h); a peek leaves it. */
		if ((flags & MSG_PEEK) || !iov_total(iov, iovcnt))
			return 0;
		return replay_take(node_replay(shim_node), s->tap, iov, iovcnt, ret);
	}
	return readahead_take(fd, s, iov, iovcnt, flags & MSG_PEEK, ret);
}

/* A read of S: 1 when served without the socket (*RET set: served_here),
 * else 0 with *CAP, how much the socket may give now (0: EAGAIN set; a
 * peek is not gated: it leaves the bytes where they are).  A turn held
 * here that comes while a read waits for it is taken here. */
static int take_or_gate(int fd, struct fd_slot *s, const struct iovec *iov, int iovcnt,
			int flags, ssize_t *ret, size_t *cap)
{
	while (!served_here(fd, s, iov, iovcnt, flags, ret)) {
		if (flags & MSG_PEEK)
			return 0;
		*cap = gate(fd, s, iov_total(iov, iovcnt), flags);
		if (*cap != REPLAY_GATE_HELD)
			return 0;
	}
	if (*ret > 0 && !(flags & MSG_PEEK))
		s->heard = 1;
	return 1;
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

static ssize_t read_tracked(int fd, struct fd_slot *s, void *buf, size_t len)
{
	struct iovec iov = { buf, len };
	ssize_t n;
	size_t cap;

	if (take_or_gate(fd, s, &iov, 1, 0, &n, &cap))
		return n;
	if ((len && !cap) || !room_for(fd, s))
		return -1;
	iov.iov_len = cap;
	return after_input(s, &iov, 1, real.read(fd, buf, cap));
}

APUS_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct fd_slot *s;
	ssize_t n;

	real_resolve();
	s = shim_slot(fd);
	if (!s || s->kind < FD_CLIENT) {
		if (s && s->kind == FD_RANDOM_DEVICE)
			return random_device_read(fd, s, buf, len);
		return real.read(fd, buf, len);
	}
	request_order_before_read(fd, s, 0);
	n = read_tracked(fd, s, buf, len);
	request_order_after_read(s, n);
	return n;
}

static ssize_t readv_tracked(int fd, struct fd_slot *s, const struct iovec *iov, int iovcnt)
{
	struct iovec capped[IOV_CAP];
	size_t want, cap;
	ssize_t n;

	if (take_or_gate(fd, s, iov, iovcnt, 0, &n, &cap))
		return n;
	want = iov_total(iov, iovcnt);
	if ((!cap && want) || !room_for(fd, s))
		return -1;
	if (cap < want) {
		iovcnt = iov_cap(iov, iovcnt, cap, capped);
		iov = capped;
	}
	return after_input(s, iov, iovcnt, real.readv(fd, iov, iovcnt));
}

APUS_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct fd_slot *s;
	ssize_t n;

	real_resolve();
	s = shim_slot(fd);
	if (!s || s->kind < FD_CLIENT) {
		if (s && s->kind == FD_RANDOM_DEVICE)
			return random_device_readv(fd, s, iov, iovcnt);
		return real.readv(fd, iov, iovcnt);
	}
	request_order_before_read(fd, s, 0);
	n = readv_tracked(fd, s, iov, iovcnt);
	request_order_after_read(s, n);
	return n;
}

static ssize_t recvfrom_tracked(int fd, struct fd_slot *s, void *buf, size_t len, int flags,
				struct sockaddr *addr, socklen_t *alen)
{
	struct iovec iov = { buf, len };
	ssize_t n;

	size_t cap;

	if (take_or_gate(fd, s, &iov, 1, flags, &n, &cap)) {
		if (n >= 0 && alen)
			*alen = 0;	/* a stream socket names no sender */
		return n;
	}
	/* A peek leaves the bytes in the socket: they count when really read. */
	if (flags & MSG_PEEK)
		return real.recvfrom(fd, buf, len, flags, addr, alen);
	if ((len && !cap) || !room_for(fd, s))
		return -1;
	iov.iov_len = cap;
	return after_input(s, &iov, 1, real.recvfrom(fd, buf, cap, flags, addr, alen));
}

APUS_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
			     socklen_t *alen)
{
	struct fd_slot *s;
	ssize_t n;

	real_resolve();
	if (!(s = shim_tracked(fd)))
		return real.recvfrom(fd, buf, len, flags, addr, alen);
	/* A peek leaves the bytes in the socket: no request starts. */
	if (!(flags & MSG_PEEK))
		request_order_before_read(fd, s, flags);
	n = recvfrom_tracked(fd, s, buf, len, flags, addr, alen);
	if (!(flags & MSG_PEEK))
		request_order_after_read(s, n);
	return n;
}

APUS_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return recvfrom(fd, buf, len, flags, NULL, NULL);
}

static ssize_t recvmsg_tracked(int fd, struct fd_slot *s, struct msghdr *msg, int flags)
{
	struct iovec capped[IOV_CAP], *orig_iov = msg->msg_iov;
	size_t orig_len = msg->msg_iovlen, want, cap;
	ssize_t n;

	if (take_or_gate(fd, s, msg->msg_iov, (int)msg->msg_iovlen, flags, &n, &cap)) {
		if (n >= 0) {
			msg->msg_namelen = 0;
			msg->msg_controllen = 0;
			msg->msg_flags = 0;
		}
		return n;
	}
	if (flags & MSG_PEEK)
		return real.recvmsg(fd, msg, flags);
	want = iov_total(msg->msg_iov, (int)msg->msg_iovlen);
	if ((!cap && want) || !room_for(fd, s))
		return -1;
	if (cap < want) {
		msg->msg_iovlen = (size_t)iov_cap(orig_iov, (int)orig_len, cap, capped);
		msg->msg_iov = capped;
	}
	n = real.recvmsg(fd, msg, flags);
	msg->msg_iov = orig_iov;
	msg->msg_iovlen = orig_len;
	return after_input(s, orig_iov, (int)orig_len, n);
}

APUS_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct fd_slot *s;
	ssize_t n;

	real_resolve();
	if (!(s = shim_tracked(fd)))
		return real.recvmsg(fd, msg, flags);
	if (!(flags & MSG_PEEK))
		request_order_before_read(fd, s, flags);
	n = recvmsg_tracked(fd, s, msg, flags);
	if (!(flags & MSG_PEEK))
		request_order_after_read(s, n);
	return n;
}
