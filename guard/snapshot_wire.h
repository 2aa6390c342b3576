/* The guard's snapshot protocol on the wire (snapshot_net.h): the
 * messages, and the checks of them that need no socket. */
#ifndef APUS_GUARD_SNAPSHOT_WIRE_H
#define APUS_GUARD_SNAPSHOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "coordinator/transport/admission.h"
#include "snapshot_net.h"

#define SNAP_MAGIC "APUSSNAP"
#define SNAP_VERSION 3	/* 2: the membership follows the snapshot; 3: rand_mark */

struct hello {
	char magic[8];
	uint32_t version;
	uint32_t node;		/* the node being rebuilt */
	uint8_t nonce[ADMIT_NONCE_LEN];
};

struct guard_proof {
	uint8_t nonce[ADMIT_NONCE_LEN];
	uint8_t mac[ADMIT_MAC_LEN];
};

struct reply {
	uint32_t status;	/* 0: the snapshot follows; else msglen bytes of why */
	uint32_t msglen;
	struct snap_meta m;
};

/* The checks that need no socket (the fuzz targets call them on
 * arbitrary bytes too).  A client's hello: 0 with *NODE the node it rebuilds,
 * -EPROTO (not a snapshot hello) or -EPERM (no such node, or SELF). */
#define SNAPNET_HELLO_LEN 32
int snapnet_hello_check(const void *hello, size_t len, int self, int nnodes, uint32_t *node);
/* The guard's reply: 0 (*M filled, the file follows), 1 (refused: *WHY_LEN
 * bytes of reason follow, fewer than CAP), or -EINVAL. */
#define SNAPNET_REPLY_LEN 48
int snapnet_reply_parse(const void *reply, size_t len, size_t cap, struct snap_meta *m,
			size_t *why_len);

#endif
