/* Snapshots served by a backup's guard over the network; see snapshot_net.h. */
#include "snapshot_net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "coordinator/transport/admission.h"
#include "coordinator/node/members.h"
#include "common/netaddr.h"
#include "host.h"
#include "rebuild.h"
#include "snapshot_wire.h"

#define IO_TIMEOUT_S 10
#define DONE_TIMEOUT_MS 30000	/* the node's own hold ends at 30 s too */
#define ADMIT_TIMEOUT_MS 2000	/* hello and proof of a client, in all */

static int send_all(int fd, const void *buf, size_t len)
{
	for (const char *p = buf; len;) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Until a client proved the key, its bytes must arrive by this time
 * (host_mono_ms; 0: no limit), however it trickles them: the guard serves
 * on its own thread, and a client stalled in the handshake kept it from
 * its node (a dead server was brought back only 10 s per stalled
 * connection later).  admit_late says the limit cut a client off. */
static uint64_t admit_by_ms;
static int admit_late;

static int recv_all(int fd, void *buf, size_t len)
{
	for (char *p = buf; len;) {
		uint64_t now = host_mono_ms();
		struct pollfd pf = { fd, POLLIN, 0 };
		if (admit_by_ms && (now >= admit_by_ms || !poll(&pf, 1, (int)(admit_by_ms - now)))) {
			admit_late = 1;
			errno = ETIMEDOUT;
			return -1;
		}
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!n)
				errno = ECONNRESET;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void set_timeouts(int fd)
{
	struct timeval tv = { IO_TIMEOUT_S, 0 };
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int snapnet_listen(const struct apus_config *cfg, int node, char *err, size_t errlen)
{
	const char *netns = cfg->nodes[node].netns;
	struct sockaddr_storage ss;
	socklen_t len;
	int home = -1, fd = -1, one = 1;

	if (node_sockaddr(&cfg->nodes[node], cfg->nodes[node].guard_port, &ss, &len)) {
		snprintf(err, errlen, "node %d's address %s is not numeric", node,
			 cfg->nodes[node].address);
		return -1;
	}
	/* Listen where the node's address lives; the guard itself stays here. */
	if (netns[0]) {
		home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		if (home < 0 || host_enter_netns(netns) < 0) {
			snprintf(err, errlen, "cannot enter network namespace %s: %s", netns,
				 strerror(errno));
			if (home >= 0)
				close(home);
			return -1;
		}
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 4)) {
		snprintf(err, errlen, "cannot listen on %s:%d: %s", cfg->nodes[node].address,
			 cfg->nodes[node].guard_port, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	if (home >= 0) {
		setns(home, CLONE_NEWNET);
		close(home);
	}
	return fd;
}

static void refuse(int fd, const char *why)
{
	struct reply r = { .status = 1, .msglen = (uint32_t)strlen(why) };

	if (!send_all(fd, &r, sizeof(r)))
		send_all(fd, why, r.msglen);
}

static int send_file(int fd, const char *path, uint64_t bytes)
{
	char buf[1 << 16];
	int in = open(path, O_RDONLY | O_CLOEXEC);
	int rc = 0;

	if (in < 0)
		return -1;
	while (bytes && !rc) {
		ssize_t n = read(in, buf, bytes < sizeof(buf) ? bytes : sizeof(buf));
		if (n <= 0 || send_all(fd, buf, (size_t)n))
			rc = -1;
		else
			bytes -= (uint64_t)n;
	}
	close(in);
	return rc;
}

/* After the snapshot, the membership in force where the node is held
 * (members.h): its index and length (0: the config file's), then the text. */
static int send_members(const struct apus_config *cfg, int self, int fd)
{
	char *text = malloc(MEMBERS_TEXT_MAX);
	uint64_t head[2] = { 0, 0 };
	size_t len;
	int rc;

	if (!text)
		return -1;
	if (members_file_read(cfg, self, text, MEMBERS_TEXT_MAX, &len, &head[0]) == 0)
		head[1] = len;
	rc = send_all(fd, head, sizeof(head)) || send_all(fd, text, (size_t)head[1]) ? -1 : 0;
	free(text);
	return rc;
}

/* The membership that came with the snapshot, made NODE's. */
static int recv_members(const struct apus_config *cfg, int node, int fd)
{
	uint64_t head[2];
	char *text;
	int rc = -1;

	if (recv_all(fd, head, sizeof(head)) || head[1] >= MEMBERS_TEXT_MAX)
		return -1;
	if (!head[1])
		return members_seed(cfg, node, NULL, 0, 0) ? -1 : 0;
	text = malloc((size_t)head[1] + 1);
	if (text && !recv_all(fd, text, (size_t)head[1])) {
		const char *body = memchr(text, '\n', (size_t)head[1]);
		body = body ? body + 1 : text + head[1];
		rc = members_seed(cfg, node, body, (size_t)head[1] - (size_t)(body - text), head[0])
			     ? -1 : 0;
	}
	free(text);
	return rc;
}

/* One request, on the accepted connection FD. */
static void serve_one(const struct apus_config *cfg, int self, int fd,
		      void (*log)(const char *))
{
	struct admit_key key;
	struct hello h;
	struct guard_proof gp;
	uint8_t mac[ADMIT_MAC_LEN];
	struct held_snapshot held;
	char err[600], line[800], path[PATH_MAX];
	uint64_t applied;

	set_timeouts(fd);
	if (recv_all(fd, &h, sizeof(h)) ||
	    snapnet_hello_check(&h, sizeof(h), self, cfg->nnodes, &h.node))
		return;
	if (admit_key_load(cfg->nodes[self].secret_file, &key, err, sizeof(err)) < 0) {
		snprintf(line, sizeof(line), "cannot serve a snapshot: %s", err);
		log(line);
		return;
	}
	if (admit_nonce(gp.nonce))
		return;
	admit_mac(&key, "apus-snapshot-guard", (uint32_t)self, h.node, h.nonce, sizeof(h.nonce),
		  gp.nonce, sizeof(gp.nonce), gp.mac);
	if (send_all(fd, &gp, sizeof(gp)) || recv_all(fd, mac, sizeof(mac)))
		return;
	if (admit_verify(&key, "apus-snapshot-client", h.node, (uint32_t)self, gp.nonce,
			 sizeof(gp.nonce), h.nonce, sizeof(h.nonce), mac)) {
		log("refused a snapshot request: the client does not know the cluster key");
		return;
	}
	admit_by_ms = 0;	/* proven: the transfer has IO_TIMEOUT_S per call */
	if (!rebuild_source_ok(cfg, self, &applied)) {
		snprintf(err, sizeof(err), "node %d is not a live backup synced to its leader", self);
		refuse(fd, err);
		return;
	}
	config_node_path(cfg, self, "apus.rebuild.log", path, sizeof(path));
	if (snapshot_hold(cfg, self, path, &held, err, sizeof(err))) {
		refuse(fd, err);
		snprintf(line, sizeof(line), "snapshot for node %u failed: %s", h.node, err);
		log(line);
		return;
	}
	struct reply r = { .status = 0,
			   .m = { held.index, held.log_pos, held.view, held.bytes, held.rand_mark } };
	int sent = !send_all(fd, &r, sizeof(r)) && !send_file(fd, held.path, held.bytes) &&
		   !send_members(cfg, self, fd);
	if (sent) {
		/* Held until node h.node joined (a byte), hung up, or the time is up. */
		struct pollfd p = { fd, POLLIN, 0 };
		char b;
		if (poll(&p, 1, DONE_TIMEOUT_MS) > 0)
			(void)!recv(fd, &b, 1, 0);
	}
	uint64_t ms = snapshot_release(&held);
	snprintf(line, sizeof(line), "%s node %u the snapshot of entry %llu (%.1f MB); held %llu ms",
		 sent ? "sent" : "failed to send", h.node, (unsigned long long)held.index,
		 held.bytes / 1e6, (unsigned long long)ms);
	log(line);
}

void snapnet_serve(const struct apus_config *cfg, int node, int lfd, void (*log)(const char *))
{
	struct sockaddr_storage addr;
	socklen_t alen = sizeof(addr);
	char from[INET6_ADDRSTRLEN + 8], line[200];
	/* One connection per call: the guard looks at its node between two. */
	int fd = accept4(lfd, (struct sockaddr *)&addr, &alen, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	admit_by_ms = host_mono_ms() + ADMIT_TIMEOUT_MS;
	admit_late = 0;
	serve_one(cfg, node, fd, log);
	admit_by_ms = 0;
	if (admit_late) {
		snprintf(line, sizeof(line),
			 "refused a snapshot request from %s: no admission within %d ms",
			 admit_addr_str((struct sockaddr *)&addr, from, sizeof(from)), ADMIT_TIMEOUT_MS);
		log(line);
	}
	close(fd);
}

/* Receives BYTES into DST (aside, then renamed). */
static int recv_file(int fd, const char *dst, uint64_t bytes)
{
	char buf[1 << 16], tmp[PATH_MAX + 8];
	int out, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0)
		return -1;
	while (bytes && !rc) {
		size_t want = bytes < sizeof(buf) ? bytes : sizeof(buf);
		if (recv_all(fd, buf, want) || write(out, buf, want) != (ssize_t)want)
			rc = -1;
		else
			bytes -= want;
	}
	if (fsync(out))
		rc = -1;
	if (close(out))
		rc = -1;
	if (!rc && rename(tmp, dst))
		rc = -1;
	if (rc)
		unlink(tmp);
	return rc;
}

int snapnet_fetch(const struct apus_config *cfg, int node, int from, const char *dst,
		  struct snap_meta *m, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct admit_key key;
	struct hello h = { .version = SNAP_VERSION, .node = (uint32_t)node };
	struct guard_proof gp;
	struct reply r;
	uint8_t mac[ADMIT_MAC_LEN];
	char why[600];
	int fd;

	if (admit_key_load(cfg->nodes[node].secret_file, &key, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	if (node_sockaddr(&cfg->nodes[from], cfg->nodes[from].guard_port, &ss, &len) || admit_nonce(h.nonce)) {
		snprintf(err, errlen, "node %d's address %s is not numeric", from,
			 cfg->nodes[from].address);
		return -1;
	}
	memcpy(h.magic, SNAP_MAGIC, 8);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	set_timeouts(fd);
	if (connect(fd, (struct sockaddr *)&ss, len)) {
		snprintf(err, errlen, "cannot reach node %d's guard at %s:%d: %s", from,
			 cfg->nodes[from].address, cfg->nodes[from].guard_port, strerror(errno));
		goto fail;
	}
	if (send_all(fd, &h, sizeof(h)) || recv_all(fd, &gp, sizeof(gp)))
		goto lost;
	/* Our proof goes first, so a guard with another key logs the refusal. */
	admit_mac(&key, "apus-snapshot-client", (uint32_t)node, (uint32_t)from, gp.nonce,
		  sizeof(gp.nonce), h.nonce, sizeof(h.nonce), mac);
	if (send_all(fd, mac, sizeof(mac)))
		goto lost;
	if (admit_verify(&key, "apus-snapshot-guard", (uint32_t)from, (uint32_t)node, h.nonce,
			 sizeof(h.nonce), gp.nonce, sizeof(gp.nonce), gp.mac)) {
		snprintf(err, errlen, "node %d's guard does not share the cluster key of %s", from,
			 cfg->nodes[node].secret_file);
		goto fail;
	}
	if (recv_all(fd, &r, sizeof(r)))
		goto lost;
	size_t l;
	if (snapnet_reply_parse(&r, sizeof(r), sizeof(why), &r.m, &l)) {
		if (recv_all(fd, why, l))
			l = 0;
		why[l] = '\0';
		snprintf(err, errlen, "node %d's guard: %s", from, l ? why : "refused");
		goto fail;
	}
	if (recv_file(fd, dst, r.m.bytes) || recv_members(cfg, node, fd)) {
		snprintf(err, errlen, "receiving node %d's snapshot into %s failed: %s", from, dst,
			 strerror(errno));
		goto fail;
	}
	*m = r.m;
	return fd;
lost:
	snprintf(err, errlen, "node %d's guard at %s:%d hung up (%s)", from,
		 cfg->nodes[from].address, cfg->nodes[from].guard_port, strerror(errno));
fail:
	close(fd);
	return -1;
}

void snapnet_done(int fd)
{
	char b = 1;

	send_all(fd, &b, 1);
	close(fd);
}
