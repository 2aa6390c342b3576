/* The one-sided write contract the protocol is written against (design §4).
 *
 * Each replica exposes one registered region.  write() lands bytes at an
 * offset of a peer's region without the peer's CPU taking part, in order per
 * peer; within one write the bytes may land in any order, except that the
 * last 8-byte word becomes visible last (a release store, or the RDMA
 * ordering the NIC gives).  Readers never assume a write is complete: they
 * check the entry's canary.  The doorbell lets a waiting peer sleep instead
 * of spinning: ring() after writes, wait() to block until something landed.
 *
 * Backends are static const tables, one file each; the protocol never asks
 * which one it runs on.  Functions return 0 or -errno. */
#ifndef APUS_TRANSPORT_H
#define APUS_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

struct transport;

struct transport_ops {
	const char *name;
	/* Writes land without ring(): a ring only wakes a peer asleep in
	 * wait(), so a peer whose answer no one waits for need not be rung
	 * per write (the protocol rings it later, in a batch). */
	int writes_land;
	/* Opens node SELF's endpoint over its registered REGION of SIZE bytes. */
	int (*open)(const struct apus_config *cfg, int self, void *region, size_t size,
		    struct transport **out);
	/* Tries once to reach PEER: 0 connected, -EAGAIN not yet, other -errno. */
	int (*connect)(struct transport *t, int peer);
	int (*connected)(struct transport *t, int peer);
	/* Whether connected PEER is still the incarnation we reached: 0 yes,
	 * -ECONNRESET if it restarted or died, -ENOTCONN if we lost the
	 * connection without knowing which (connect() again: the check after
	 * it says -ECONNRESET if a new incarnation answered). */
	int (*check)(struct transport *t, int peer);
	/* Lands LEN bytes from BUF at offset OFF of PEER's region.  A backend
	 * may hold writes until the next ring(PEER): ring after each group. */
	int (*write)(struct transport *t, int peer, uint64_t off, const void *buf, size_t len);
	/* Tells PEER that writes landed (it may be asleep in wait()). */
	void (*ring)(struct transport *t, int peer);
	/* Makes progress on incoming writes without blocking (a no-op where
	 * writes land by themselves).  Returns how many were applied. */
	int (*poll)(struct transport *t);
	/* The local doorbell value; read it before checking for work. */
	uint32_t (*bell)(struct transport *t);
	/* Blocks until the doorbell moved past SEEN or TIMEOUT_US passed. */
	void (*wait)(struct transport *t, uint32_t seen, int timeout_us);
	/* Wakes local waiters (another thread of this node has news). */
	void (*wake)(struct transport *t);
	/* Stops accepting writes from PEER's current incarnation (the process
	 * running now): nothing it writes lands after fence returns.  A later
	 * incarnation (the peer restarted) is admitted again.  A fenced peer's
	 * connect() fails and its check() says -ECONNRESET. */
	int (*fence)(struct transport *t, int peer);
	/* Lifts a fence on PEER (we follow it again after an election that
	 * failed): its writes are accepted once it reconnects. */
	void (*unfence)(struct transport *t, int peer);
	void (*close)(struct transport *t);
	/* In a child the server forked (a BGSAVE): closes every descriptor of
	 * ours, without a word to peers and without locks (the child has one
	 * thread), so that the child holds no socket a restarted or
	 * re-executed node needs (its peer port).  NULL: nothing to close. */
	void (*forget)(struct transport *t);
	/* This process was restored from an image of itself (CRIU): the
	 * connections it holds are copies whose other ends moved on.  Drops
	 * them all and takes a new incarnation, so that peers see a restart.
	 * NULL: nothing to drop (shm holds mappings, not connections). */
	void (*restored)(struct transport *t);
};

struct transport {
	const struct transport_ops *ops;
};

/* The backend named NAME, or NULL if this build has none by that name. */
const struct transport_ops *transport_find(const char *name);

/* The tcp backend's wire checks that need no socket (transport_tcp.c;
 * the fuzz targets call them on arbitrary bytes). */
#define TCP_HELLO_LEN 32
#define TCP_FRAME_HDR_LEN 16
/* A hello of LEN bytes: 0, -EPROTO (not an apus peer's hello), or -EPERM
 * (it does not name a peer of node SELF writing to SELF). */
int tcp_hello_check(const void *hello, size_t len, int self, int nnodes);
/* A frame header: 0 with *OFF, *LEN set if the frame stays inside a region
 * of SIZE bytes, else -ERANGE. */
int tcp_frame_parse(const void *hdr, size_t size, uint64_t *off, uint32_t *len);

extern const struct transport_ops transport_shm_ops;
extern const struct transport_ops transport_tcp_ops;
extern const struct transport_ops transport_rdma_ops;

#endif
