/* The guard's snapshot messages, checked as bytes; see snapshot_wire.h. */
#include "snapshot_wire.h"

#include <errno.h>
#include <string.h>

_Static_assert(sizeof(struct hello) == SNAPNET_HELLO_LEN && sizeof(struct reply) == SNAPNET_REPLY_LEN,
	       "wire sizes in snapshot_wire.h");

int snapnet_hello_check(const void *bytes, size_t len, int self, int nnodes, uint32_t *node)
{
	struct hello h;

	if (len != sizeof(h))
		return -EPROTO;
	memcpy(&h, bytes, sizeof(h));
	if (memcmp(h.magic, SNAP_MAGIC, 8) || h.version != SNAP_VERSION)
		return -EPROTO;
	if (h.node >= (uint32_t)nnodes || h.node == (uint32_t)self)
		return -EPERM;
	*node = h.node;
	return 0;
}

int snapnet_reply_parse(const void *bytes, size_t len, size_t cap, struct snap_meta *m,
			size_t *why_len)
{
	struct reply r;

	if (len != sizeof(r) || !cap)
		return -EINVAL;
	memcpy(&r, bytes, sizeof(r));
	*m = r.m;
	/* The reason's length is the peer's word: read no more than fits. */
	*why_len = r.msglen < cap - 1 ? r.msglen : cap - 1;
	return r.status ? 1 : 0;
}
