/* The write family.  With commit_wait = reply, a reply to a client leaves
 * only once everything the server has read so far is committed (output
 * commit).  With the checker on, what the server wrote to each replicated
 * client is hashed, and the leader logs a checkpoint at every OUT_FOLD
 * bytes without waiting for it to commit; backups compare their own. */
#include <errno.h>
#include <limits.h>

#include "../coordinator/entry.h"
#include "../coordinator/replay.h"
#include "shim.h"

#define RECORDS_PER_ENTRY 32

struct checkpoints {
	struct fd_slot *s;
	int count;
	struct out_record rec[RECORDS_PER_ENTRY];
};

static void flush(struct checkpoints *c)
{
	if (c->count)
		node_record(shim_node, ENTRY_HASH, c->rec, sizeof(c->rec[0]) * (size_t)c->count);
	c->count = 0;
}

static void checkpoint(void *arg, uint64_t offset, uint64_t crc)
{
	struct checkpoints *c = arg;

	c->rec[c->count++] = (struct out_record){ c->s->conn.view, c->s->conn.idx, offset, crc };
	if (c->count == RECORDS_PER_ENTRY)
		flush(c);
}

/* Hashes the first N bytes of IOV written to the client of slot S. */
static void after_output(struct fd_slot *s, const struct iovec *iov, int iovcnt, ssize_t n)
{
	struct checkpoints c = { .s = s };

	for (int i = 0; i < iovcnt && n > 0; i++) {
		size_t len = iov[i].iov_len < (size_t)n ? iov[i].iov_len : (size_t)n;
		out_hash_feed(&s->out, iov[i].iov_base, len, checkpoint, &c);
		n -= (ssize_t)len;
	}
	flush(&c);
}

/* The slot of FD if it is a replicated client of this leader, else NULL;
 * holds the reply until its inputs are committed where so configured.
 * *DENY is set when the reply must never leave (the leader was deposed
 * before its inputs committed). */
static inline struct fd_slot *before_output(int fd, int *deny)
{
	struct fd_slot *s = shim_tracked(fd);

	*deny = 0;
	if (!s || s->kind != FD_CLIENT)
		return 0;
	if (shim_node->cfg.commit_wait == COMMIT_WAIT_REPLY && node_wait_output(shim_node)) {
		*deny = 1;
		errno = ECONNRESET;
		return 0;
	}
	return shim_node->cfg.checker ? s : 0;
}

/* Backup: what the server writes to a replay connection goes straight to
 * the output check (replay.h), not through the socket.  1 with *RET set
 * if so. */
static int replay_output(int fd, const struct iovec *iov, int iovcnt, ssize_t *ret)
{
	struct fd_slot *s = shim_tracked(fd);
	size_t total = 0;

	if (!s || s->kind != FD_REPLAY)
		return 0;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (!total || total > SSIZE_MAX || !replay_absorb(shim_node->replay, s->tap, iov, iovcnt))
		return 0;
	*ret = (ssize_t)total;
	return 1;
}

APUS_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct fd_slot *s;

	real_resolve();
	int deny;
	ssize_t n;

	if (replay_output(fd, &(struct iovec){ (void *)buf, len }, 1, &n))
		return n;
	s = before_output(fd, &deny);
	if (deny)
		return -1;
	n = real.write(fd, buf, len);
	if (s && n > 0)
		after_output(s, &(struct iovec){ (void *)buf, len }, 1, n);
	return n;
}

APUS_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct fd_slot *s;

	real_resolve();
	int deny;
	ssize_t n;

	if (replay_output(fd, iov, iovcnt, &n))
		return n;
	s = before_output(fd, &deny);
	if (deny)
		return -1;
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
	int deny;
	ssize_t n;

	if (replay_output(fd, &(struct iovec){ (void *)buf, len }, 1, &n))
		return n;
	s = before_output(fd, &deny);
	if (deny)
		return -1;
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
	int deny;
	ssize_t n;

	if (replay_output(fd, msg->msg_iov, (int)msg->msg_iovlen, &n))
		return n;
	s = before_output(fd, &deny);
	if (deny)
		return -1;
	n = real.sendmsg(fd, msg, flags);
	if (s && n > 0)
		after_output(s, msg->msg_iov, (int)msg->msg_iovlen, n);
	return n;
}
