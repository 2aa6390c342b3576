/* Shared by the shim's files: its mode, its node, and the entry check
 * every wrapper makes first. */
#ifndef APUS_SHIM_H
#define APUS_SHIM_H

#include <fcntl.h>
#include <sys/socket.h>

#include "coordinator/node/node.h"
#include "fd_ops.h"
#include "fdtable.h"
#include "real.h"

/* The interposed libc calls: the only symbols libapus.so exports. */
#define APUS_EXPORT __attribute__((visibility("default")))

enum shim_mode {
	MODE_PASSTHROUGH = 0,	/* not a replica (no APUS_CONFIG), or a forked child */
	MODE_ACTIVE,		/* the node runs: replicate the application port */
	MODE_FAILED,		/* the node could not start: refuse application clients */
};

extern int shim_mode;
/* This thread listens on the application port (the server's main one). */
extern __thread int shim_app_thread;
extern int shim_ready;
extern struct node *shim_node;

void shim_init_slow(void);

/* Makes sure the shim is initialised; returns 1 when this call should get
 * the replica's treatment, 0 when it must simply pass through. */
static inline int shim_enter(void)
{
	if (__builtin_expect(!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE), 0))
		shim_init_slow();
	return __atomic_load_n(&shim_mode, __ATOMIC_RELAXED) != MODE_PASSTHROUGH;
}

/* The slot of FD, of any kind, when the shim acts at all, else NULL
 * (read() and readv() tell a random device apart in this one lookup). */
static inline struct fd_slot *shim_slot(int fd)
{
	return shim_enter() ? fd_lookup(fd) : 0;
}

/* The slot of FD when it is a connection we act on, else NULL. */
static inline struct fd_slot *shim_tracked(int fd)
{
	struct fd_slot *s = shim_slot(fd);

	return s && s->kind >= FD_CLIENT ? s : 0;
}

/* Whether a read of FD with FLAGS would block: a blocking socket and no
 * MSG_DONTWAIT (one fcntl: callers ask only off the fast path). */
static inline int shim_read_blocks(int fd, int flags)
{
	return !(flags & MSG_DONTWAIT) && !(fcntl(fd, F_GETFL) & O_NONBLOCK);
}

/* poll() with the shim's view of the server's clients (poll.c), for
 * select() too (select.c): TIMEOUT_MS < 0 waits for ever; SIGMASK as
 * ppoll()'s. */
int shim_poll_ms(struct pollfd *fds, nfds_t nfds, int timeout_ms, const sigset_t *sigmask);

/* Read-ahead (readahead.c).  A fresh client slot starts with none. */
void readahead_reset(struct fd_slot *s);
/* The server closes FD: what it never read of it is dropped. */
void readahead_forget(int fd, struct fd_slot *s);
/* Serves a read of FD from what was read ahead, or keeps log order.
 * Returns 1 with *RET set when it handled the read, 0 when the read
 * takes the ordinary path. */
int readahead_take(int fd, struct fd_slot *s, const struct iovec *iov, int iovcnt, int peek,
		   ssize_t *ret);

/* --- epoll (epoll.c) --- */
typedef int (*real_wait_fn)(int epfd, struct epoll_event *ev, int max, int timeout,
			    const sigset_t *sigmask);
/* Whether S is a connection of KIND that EPFD watches for input. */
int epoll_wants_input(int epfd, const struct fd_slot *s, int kind);
/* Drops from EV[first..n) the events already among EV[0..first), merging
 * their masks there.  Returns the new count. */
int epoll_merge_events(struct epoll_event *ev, int first, int n);

/* Leader (answers.c): the server read input of client S, stamped
 * STAMP_MS, or wrote to it; S is a new connection; the server forks for
 * a recovery point; how many clients' requests that point cut in two
 * (FIRST: one of them), for node_set_point_cut. */
void answers_heard(struct fd_slot *s, uint64_t stamp_ms);
/* ... and the flags of input read from S now: ENTRY_F_ANSWERED when the
 * server wrote to S since it last read from it. */
int answers_flags(const struct fd_slot *s);
void answers_wrote(struct fd_slot *s);
void answers_reset(struct fd_slot *s);
void answers_fork(void);
int answers_cut(struct viewstamp *first);

/* (point_conns.c) The server forks for a recovery point: which
 * connection each descriptor serves is kept; and what FD served then, for
 * node_set_point_conn. */
void point_conns_fork(void);
int point_conns_at_fork(int fd, struct viewstamp *vs);

/* Leader (readahead.c): whether it reads ahead now; its epoll_wait();
 * whether bytes read ahead wait for the server (node.snap.input_pending). */
int readahead_active(void);
int readahead_pending(void);
int readahead_wait(int epfd, struct epoll_event *ev, int max, int timeout,
		   const sigset_t *sigmask, real_wait_fn wait);
/* The lock of the read-ahead state, which also guards the slots' epoll fields. */
void readahead_lock(void);
void readahead_unlock(void);

/* Backup (inplace.c): its epoll_wait() on EPFD, whose slot is SET; EPFD
 * watches a replay connection: the set's replay waker joins it.  (A read served from a held turn is
 * turns.h's replay_read.) */
int inplace_wait(int epfd, struct fd_slot *set, struct epoll_event *ev, int max, int timeout,
		 const sigset_t *sigmask, real_wait_fn wait);
void inplace_set_watches(int epfd, struct fd_slot *set);
/* Set SET is closed: its waker goes back. */
void inplace_set_closed(struct fd_slot *set);
/* Drops our eventfd's events from EV[0..n) (draining it); the new count. */
int inplace_drop_kicks(struct fd_slot *set, struct epoll_event *ev, int n);

/* thread_order = requests (request_order.c): whether it is on; a server
 * thread waits for events, wrote to a replicated connection, is about to
 * read a replay connection, or a client (FD, with FLAGS), read N from
 * that client. */
int request_order_on(void);
void request_order_idle(void);
void request_order_wrote(void);
void request_order_closed(int fd);
/* The thread waits inside the shim (ON) or no longer (0): a reply held
 * for commit.  The token's holder keeps it meanwhile. */
void request_order_shim_wait(int on);
void request_order_before_replay_read(void);
void request_order_before_client_read(int fd, int flags);
void request_order_after_client_read(ssize_t n);

/* Proposes the CLOSE of a leader's client connection, once. */
void shim_log_close(struct fd_slot *s);

#endif
