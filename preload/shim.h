/* Shared by the shim's files: its mode, its node, and the entry check
 * every wrapper makes first. */
#ifndef APUS_SHIM_H
#define APUS_SHIM_H

#include "../coordinator/node.h"
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

/* The slot of FD when it is a connection we act on, else NULL. */
static inline struct fd_slot *shim_tracked(int fd)
{
	struct fd_slot *s;

	if (!shim_enter())
		return 0;
	s = fd_lookup(fd);
	return s && s->kind >= FD_CLIENT ? s : 0;
}

/* Read-ahead (readahead.c).  A fresh client slot starts with none. */
void readahead_reset(struct fd_slot *s);
/* The server closes FD: what it never read of it is dropped. */
void readahead_forget(int fd, struct fd_slot *s);
/* Serves a read of FD from what was read ahead, or keeps log order.
 * Returns 1 with *RET set when it handled the read, 0 when the read
 * takes the ordinary path. */
int readahead_take(int fd, struct fd_slot *s, const struct iovec *iov, int iovcnt, int peek,
		   ssize_t *ret);

/* Proposes the CLOSE of a leader's client connection, once. */
void shim_log_close(struct fd_slot *s);

#endif
