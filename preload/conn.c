/* Connection life cycle on the application port: listen, accept, close.
 * The leader turns an accept into an ACCEPT entry and the connection's
 * first close into a CLOSE entry; a backup admits only its own replay
 * connections and refuses every other client at once. */
#define LOG_PREFIX "shim: "
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/logger.h"
#include "coordinator/node/turns.h"
#include "shim.h"

static int port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return -1;
}

/* Learns once whether listening socket FD is the application's port. */
static int listener_kind(int fd)
{
	struct fd_slot *s = fd_slot_get(fd);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int kind = FD_OTHER_LISTENER;

	if (!s)
		return FD_OTHER_LISTENER;
	if (s->kind == FD_OTHER_LISTENER || s->kind == FD_APP_LISTENER)
		return (int)s->kind;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
	    (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
		if (shim_mode == MODE_FAILED)
			kind = FD_APP_LISTENER;	/* unknown port: refuse all TCP clients */
		else if (port_of(&ss) == node_app_port(shim_node))
			kind = FD_APP_LISTENER;
	}
	s->kind = (uint32_t)kind;
	return kind;
}

static void refuse(int fd, const char *why)
{
	static uint64_t refused;
	uint64_t n = __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);

	if (shim_node)
		node_refused_clients(shim_node, n);
	if (n <= 10 || n % 1000 == 0)
		pr_warn("refused a client on the application port (%s; %llu so far)", why,
			(unsigned long long)n);
	real.close(fd);
}

/* Decides what becomes of FD, just accepted on the application port.
 * Returns 0 to hand it to the server, -1 if it was refused (and closed). */
static int admit(int fd)
{
	struct node *n = shim_node;
	struct fd_slot *s;

	if (shim_mode != MODE_ACTIVE) {
		refuse(fd, "this replica failed to start");
		return -1;
	}
	s = fd_slot_get(fd);
	if (!s) {
		refuse(fd, "descriptor out of range");
		return -1;
	}
	/* Our own replay connections first: any node may be replaying (a new
	 * leader executes its log before it serves). */
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	struct replay_tap *tap = NULL;

	if (getpeername(fd, (struct sockaddr *)&peer, &len) == 0 && port_of(&peer) > 0)
		tap = replay_tap_claim(node_replay(n), fd, &peer, (uint16_t)port_of(&peer));
	if (!tap && node_serving(n)) {
		struct viewstamp vs;

		if (node_propose(n, ENTRY_ACCEPT, 0, (struct viewstamp){ 0, 0 }, NULL, 0, 0, &vs)) {
			refuse(fd, "this node was deposed");
			return -1;
		}
		s->client.conn = vs;
		s->client.closed_logged = 0;
		s->client.out = (struct out_hash){ 0, 0 };
		s->heard = 0;
		s->client.polled = 0;
		answers_reset(s);
		readahead_reset(s);
		s->kind = FD_CLIENT;
		return 0;
	}
	if (!tap) {
		char why[96];
		int leader = node_leader(n);

		if (leader == node_self(n))
			snprintf(why, sizeof(why), "this node was just elected and is catching up");
		else if (leader >= 0)
			snprintf(why, sizeof(why), "this node is a backup; the leader is node %d",
				 leader);
		else
			snprintf(why, sizeof(why), "no leader yet (election under way)");
		refuse(fd, why);
		return -1;
	}
	s->replay.tap = tap;
	s->ep_set = 0;
	s->heard = 0;
	s->kind = FD_REPLAY;
	return 0;
}

static int accept_common(int lfd, struct sockaddr *addr, socklen_t *alen, int flags, int four)
{
	socklen_t alen_in = alen ? *alen : 0;

	if (!shim_enter())
		return four ? real.accept4(lfd, addr, alen, flags) : real.accept(lfd, addr, alen);
	for (;;) {
		int fd = four ? real.accept4(lfd, addr, alen, flags) : real.accept(lfd, addr, alen);

		if (fd < 0 || listener_kind(lfd) != FD_APP_LISTENER || admit(fd) == 0)
			return fd;
		/* Refused: the server gets the next pending client instead (or
		 * EAGAIN, as if the refused one never came). */
		if (alen)
			*alen = alen_in;
	}
}

APUS_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	return accept_common(fd, addr, alen, 0, 0);
}

APUS_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	return accept_common(fd, addr, alen, flags, 1);
}

APUS_EXPORT int listen(int fd, int backlog)
{
	int rc;

	real_resolve();
	rc = real.listen(fd, backlog);
	if (rc == 0 && shim_enter() && listener_kind(fd) == FD_APP_LISTENER && shim_node) {
		shim_app_thread = 1;
		node_app_listening(shim_node);
		pr_info("the server listens on application port %d",
			node_app_port(shim_node));
	}
	return rc;
}

void shim_log_close(struct fd_slot *s)
{
	if (s->kind != FD_CLIENT || s->client.closed_logged)
		return;
	s->client.closed_logged = 1;
	/* The CLOSE carries the final checkpoint of the connection's output. */
	const struct fd_client *c = &s->client;
	struct out_record last = { c->conn.view, c->conn.idx, c->out.off, c->out.crc };
	struct iovec iov = { &last, sizeof(last) };
	node_propose(shim_node, ENTRY_CLOSE, answers_flags(s), c->conn, &iov, 1,
		     node_config(shim_node)->checker ? sizeof(last) : 0, NULL);
}

void client_fd_close(int fd, struct fd_slot *s)
{
	readahead_forget(fd, s);
	shim_log_close(s);
	request_order_closed(fd);
}

void replay_fd_close(int fd, struct fd_slot *s)
{
	(void)fd;
	replay_tap_close(node_replay(shim_node), s->replay.tap);
}

APUS_EXPORT int close(int fd)
{
	struct fd_slot *s;

	real_resolve();
	if (!shim_enter() || !(s = fd_lookup(fd)))
		return real.close(fd);
	if (s->epoll.clients) {
		/* A set of the server's (epoll.c). */
		__atomic_store_n(&s->epoll.clients, 0, __ATOMIC_RELEASE);
		inplace_set_closed(s);
	}
	if (s->kind != FD_UNKNOWN) {
		s->ep_set = 0;
		if (fd_ops_of(s)->close)
			fd_ops_of(s)->close(fd, s);
		s->kind = FD_UNKNOWN;
	}
	return real.close(fd);
}

APUS_EXPORT int shutdown(int fd, int how)
{
	real_resolve();
	return real.shutdown(fd, how);
}
