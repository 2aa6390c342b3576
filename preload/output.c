/* The write family.  With commit_wait = reply, a reply to a client leaves
 * only once everything the server has read so far is committed (output
 * commit).  With the checker on, what the server wrote to each replicated
 * client is hashed, and the leader logs a mark at every OUT_FOLD
 * bytes without waiting for it to commit; backups compare their own. */
#include <errno.h>
#include <limits.h>

#include "coordinator/storage/entry.h"
#include "coordinator/node/turns.h"
#include "shim.h"

#define RECORDS_PER_ENTRY 32

struct marks {
	struct fd_slot *s;
	int count;
	struct out_record rec[RECORDS_PER_ENTRY];
};

static void flush(struct marks *c)
{
	if (c->count)
		node_record(shim_node, ENTRY_HASH, c->rec, sizeof(c->rec[0]) * (size_t)c->count);
	c->count = 0;
}

static void mark(void *arg, uint64_t offset, uint64_t crc)
{
	struct marks *c = arg;

	struct viewstamp conn = c->s->client.conn;

	c->rec[c->count++] = (struct out_record){ conn.view, conn.idx, offset, crc };
	if (c->count == RECORDS_PER_ENTRY)
		flush(c);
}

/* Hashes the first N bytes of IOV written to the client of slot S. */
static void after_output(struct fd_slot *s, const struct iovec *iov, int iovcnt, ssize_t n)
{
	struct marks c = { .s = s };

	for (int i = 0; i < iovcnt && n > 0; i++) {
		size_t len = iov[i].iov_len < (size_t)n ? iov[i].iov_len : (size_t)n;
		out_hash_feed(&s->client.out, iov[i].iov_base, len, mark, &c);
		n -= (ssize_t)len;
	}
	flush(&c);
}

/* Backup: its server's output on a replay connection goes straight to the
 * output check (replay.h), not through the socket. */
int replay_fd_write(struct fd_slot *s, const struct iovec *iov, int iovcnt, int greeting,
		    struct fd_slot **hash, ssize_t *ret)
{
	size_t total = iov_total(iov, iovcnt);

	(void)hash;
	if (!total || total > SSIZE_MAX ||
	    !replay_absorb(node_replay(shim_node), s->replay.tap, iov, iovcnt, !greeting))
		return 0;
	*ret = (ssize_t)total;
	return 1;
}

/* Leader: with commit_wait = reply, a reply leaves only once the inputs
 * are committed, and one that must never leave (deposed before they
 * committed) fails with ECONNRESET; with the checker on, it is hashed. */
int client_fd_write(struct fd_slot *s, const struct iovec *iov, int iovcnt, int greeting,
		    struct fd_slot **hash, ssize_t *ret)
{
	(void)iov;
	(void)iovcnt;
	answers_wrote(s);
	if (node_config(shim_node)->commit_wait == COMMIT_WAIT_REPLY) {
		int rc;

		request_order_shim_wait(1);
		rc = node_wait_output(shim_node);
		request_order_shim_wait(0);
		if (rc) {
			errno = ECONNRESET;
			*ret = -1;
			return 1;
		}
	}
	*hash = node_config(shim_node)->checker && !greeting ? s : NULL;
	return 0;
}

/* Decides a write of IOV to FD before it happens, by FD's kind
 * (fd_ops.h's write). */
static inline int before_output(int fd, const struct iovec *iov, int iovcnt,
				struct fd_slot **hash, ssize_t *ret)
{
	struct fd_slot *s = shim_slot(fd);
	int greeting;

	*hash = NULL;
	if (!s || !fd_ops_of(s)->write)
		return 0;
	request_order_wrote();
	/* Written before the server read anything of this connection: the
	 * same bytes on every replica only if the server's greeting is
	 * deterministic, which the config may say it is not. */
	greeting = !s->heard && node_config(shim_node)->checker_greeting == GREETING_SKIP;
	return fd_ops_of(s)->write(s, iov, iovcnt, greeting, hash, ret);
}

APUS_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct fd_slot *s;

	real_resolve();
	ssize_t n;

	if (before_output(fd, &(struct iovec){ (void *)buf, len }, 1, &s, &n))
		return n;
	n = real.write(fd, buf, len);
	if (s && n > 0)
		after_output(s, &(struct iovec){ (void *)buf, len }, 1, n);
	return n;
}

APUS_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct fd_slot *s;

	real_resolve();
	ssize_t n;

	if (before_output(fd, iov, iovcnt, &s, &n))
		return n;
	n = real.writev(fd, iov, iovcnt);
	if (s && n > 0)
		after_output(s, iov, iovcnt, n);
	return n;
}

APUS_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			   const struct sockaddr *addr, socklen_t alen)
{
	struct fd_slot *s;

	real_resolve();
	ssize_t n;

	if (before_output(fd, &(struct iovec){ (void *)buf, len }, 1, &s, &n))
		return n;
	n = real.sendto(fd, buf, len, flags, addr, alen);
	if (s && n > 0)
		after_output(s, &(struct iovec){ (void *)buf, len }, 1, n);
	return n;
}

APUS_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	return sendto(fd, buf, len, flags, NULL, 0);
}

APUS_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct fd_slot *s;

	real_resolve();
	ssize_t n;

	if (before_output(fd, msg->msg_iov, (int)msg->msg_iovlen, &s, &n))
		return n;
	n = real.sendmsg(fd, msg, flags);
	if (s && n > 0)
		after_output(s, msg->msg_iov, (int)msg->msg_iovlen, n);
	return n;
}
