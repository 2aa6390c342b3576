/* What the shim knows about each file descriptor: two levels (a directory
 * of chunks), read without locks, chunks allocated under a mutex and never
 * freed.  An fd we never saw costs one load. */
#ifndef APUS_FDTABLE_H
#define APUS_FDTABLE_H

#include <stdint.h>

#include "checker/outhash.h"
#include "coordinator/storage/entry.h"
#include "order_queue.h"

enum fd_kind {
	FD_UNKNOWN = 0,
	FD_RANDOM_DEVICE,	/* /dev/urandom or /dev/random, opened to read (random.c) */
	FD_OTHER_LISTENER,	/* a listening socket that is not the application port */
	FD_APP_LISTENER,	/* the application's listening port */
	FD_CLIENT,		/* leader: a client connection being replicated */
	FD_REPLAY,		/* backup: one of our own replay connections */
	FD_KINDS
};

struct replay_tap;

/* FD_CLIENT: a leader's client connection being replicated. */
struct fd_client {
	struct viewstamp conn;	/* the connection's conn_vs (its ACCEPT) */
	uint32_t closed_logged;	/* its CLOSE entry was proposed */
	struct out_hash out;	/* what the server wrote to it so far */
	/* answers.c: the server read input from it and wrote nothing since,
	 * and that input's stamp; at a leader's snapshot fork it was (watch),
	 * and then read more before writing (cut). */
	uint32_t unanswered, point_watch, point_cut;
	uint64_t heard_stamp_ms;
	uint64_t room_wait_ns;	/* its input waits for room in the log since (0: not) */
	/* A poll() of the server's reported it readable (poll.c): a server
	 * that takes EAGAIN after that for an error on the connection. */
	uint32_t polled;
	/* Read-ahead (readahead.c): */
	char *ra_buf;		/* committed bytes read ahead, not yet consumed */
	uint32_t ra_off, ra_len;
	uint64_t ra_stamp;	/* their entry's input clock stamp (input_clock.h) */
	uint64_t ra_idx;	/* ... and index (input_random.h) */
	uint32_t ra_want;	/* what the server asked a read for last time */
	int ra_err;		/* an error the read-ahead met, for the server's next read */
	struct oq_link ra_link;	/* in the order queue (order_queue.h) */
	int ra_retry;		/* told EAGAIN to keep log order: report it ready */
};

/* FD_REPLAY: one of a backup's replay connections. */
struct fd_replay {
	struct replay_tap *tap;	/* replay's side of it (turns.h) */
};

/* An epoll set of the server's (any kind: the fd of the set itself). */
struct fd_epoll_set {
	int clients;		/* it watches a client or replay connection (epoll.c) */
	int waker;		/* on a backup: its replay waker + 1 (inplace.c) */
};

/* The fields of one kind are touched only while the slot is of that kind;
 * a slot keeps them all (no union): another thread may still read the
 * fields of the kind the slot had (a snapshot fork's point_conns.c). */
struct fd_slot {
	uint32_t kind;
	/* FD_CLIENT and FD_REPLAY: */
	int heard;		/* the server read input from it */
	int ep_set;		/* the epoll set watching it for input, plus 1 (0: none) */
	uint32_t ep_events;	/* and what it registered there */
	uint64_t ep_data;
	/* The connection it served at the snapshot fork numbered FORK_GEN
	 * (point_conns.c). */
	struct viewstamp fork_conn;
	uint32_t fork_gen;
	struct fd_client client;
	struct fd_replay replay;
	struct fd_epoll_set epoll;
};

#define FD_CHUNK_BITS 12
#define FD_CHUNK (1 << FD_CHUNK_BITS)
#define FD_MAX (1 << 20)

extern struct fd_slot *fd_dir[FD_MAX / FD_CHUNK];

/* The slot of FD if its chunk exists, else NULL. */
static inline struct fd_slot *fd_lookup(int fd)
{
	struct fd_slot *chunk;

	if ((unsigned)fd >= FD_MAX)
		return 0;
	/* Pairs with the release store in fd_slot_get(). */
	chunk = __atomic_load_n(&fd_dir[fd >> FD_CHUNK_BITS], __ATOMIC_ACQUIRE);
	return chunk ? &chunk[fd & (FD_CHUNK - 1)] : 0;
}

/* The slot of FD, allocating its chunk; NULL if FD is out of range or
 * memory ran out. */
struct fd_slot *fd_slot_get(int fd);

#endif
