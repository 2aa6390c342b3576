/* What the shim does in the server's calls on a descriptor, by the
 * descriptor's kind (fdtable.h): one table per kind, as each transport has
 * one (coordinator/transport/transport.h).  A wrapper looks the slot up and
 * calls its kind's entry; an entry left NULL means the shim has nothing to
 * do there, and the call goes to libc unchanged.  The tables are in
 * fd_ops.c; each function lives with its libc family (input.c, output.c,
 * poll.c, epoll.c, conn.c, random.c). */
#ifndef APUS_FD_OPS_H
#define APUS_FD_OPS_H

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fdtable.h"

/* One read call of the server's, whatever its libc family: its buffers,
 * and what read_call_real() needs to make the call itself. */
enum read_family { CALL_READ, CALL_READV, CALL_RECVFROM, CALL_RECVMSG };

struct read_call {
	enum read_family family;
	int fd, flags;
	const struct iovec *iov;	/* the server's buffers */
	int iovcnt;
	struct sockaddr *addr;		/* recvfrom */
	socklen_t *alen;
	struct msghdr *msg;		/* recvmsg (iov is its msg_iov) */
	int real_called;		/* the call reached the kernel */
};

/* The call itself, into at most CAP bytes of its buffers (input.c). */
ssize_t read_call_real(struct read_call *c, size_t cap);

/* What a wait of the server's on a descriptor means (poll.c, select.c). */
#define FD_WAIT_INPUT 1		/* input the shim serves: a request may come */
#define FD_WAIT_ACCEPT 2	/* the application's listener: a client may come */

struct fd_ops {
	/* A read, any family (input.c). */
	ssize_t (*read)(struct fd_slot *s, struct read_call *c);
	/* poll() found FD readable: whether the server may be told so, that
	 * is, whether the shim would let its read through now (poll.c). */
	int (*poll_ready)(int fd, struct fd_slot *s);
	/* A write, before it happens (output.c).  Returns 1 when it is done
	 * here, with *RET set; else 0, with *HASH the slot whose output the
	 * checker hashes once written (or NULL).  GREETING: written before
	 * the server read anything of it, and not to be compared. */
	int (*write)(struct fd_slot *s, const struct iovec *iov, int iovcnt, int greeting,
		     struct fd_slot **hash, ssize_t *ret);
	/* epoll_ctl() added or changed S in the set SET (NULL: removed it);
	 * S's epoll fields are set, under readahead_lock() (epoll.c). */
	void (*watched)(int epfd, struct fd_slot *s, struct fd_slot *set);
	/* The server closes FD, before the real close (conn.c). */
	void (*close)(int fd, struct fd_slot *s);
	unsigned waits;		/* FD_WAIT_* */
};

extern const struct fd_ops fd_kind_ops[FD_KINDS];

static inline const struct fd_ops *fd_ops_of(const struct fd_slot *s)
{
	return &fd_kind_ops[s->kind];
}

/* FD_CLIENT, a leader's client. */
ssize_t client_fd_read(struct fd_slot *s, struct read_call *c);
int client_fd_poll_ready(int fd, struct fd_slot *s);
int client_fd_write(struct fd_slot *s, const struct iovec *iov, int iovcnt, int greeting,
		    struct fd_slot **hash, ssize_t *ret);
void client_fd_close(int fd, struct fd_slot *s);

/* FD_REPLAY, a backup's replay connection. */
ssize_t replay_fd_read(struct fd_slot *s, struct read_call *c);
int replay_fd_poll_ready(int fd, struct fd_slot *s);
int replay_fd_write(struct fd_slot *s, const struct iovec *iov, int iovcnt, int greeting,
		    struct fd_slot **hash, ssize_t *ret);
void replay_fd_watched(int epfd, struct fd_slot *s, struct fd_slot *set);
void replay_fd_close(int fd, struct fd_slot *s);

/* FD_RANDOM_DEVICE: /dev/urandom or /dev/random, read for the log's numbers. */
ssize_t random_fd_read(struct fd_slot *s, struct read_call *c);

#endif
