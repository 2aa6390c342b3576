/* Which connection each of the server's descriptors served when it forked
 * for a recovery point.  snapshot_cmd names a client with a session (a
 * Redis client's SELECTed database) by its descriptor, as the server
 * knew it at the fork (coordinator/storage/sessions.h); by the time the command
 * ends, that descriptor may serve another connection, so the node asks
 * here.  Each slot keeps its connection of the latest fork, numbered: no
 * allocation in the fork path, and a slot closed or reused since keeps
 * what it served then. */
#include "coordinator/node/node.h"
#include "coordinator/node/turns.h"
#include "shim.h"

static uint32_t fork_gen;	/* the latest snapshot fork's number (0: none yet) */

void point_conns_fork(void)
{
	uint32_t gen = __atomic_add_fetch(&fork_gen, 1, __ATOMIC_ACQ_REL);

	for (int d = 0; d < FD_MAX / FD_CHUNK; d++) {
		struct fd_slot *chunk = __atomic_load_n(&fd_dir[d], __ATOMIC_ACQUIRE);

		for (int i = 0; chunk && i < FD_CHUNK; i++) {
			struct fd_slot *s = &chunk[i];
			uint32_t kind = __atomic_load_n(&s->kind, __ATOMIC_RELAXED);
			struct viewstamp vs;

			if (kind == FD_CLIENT)
				vs = s->client.conn;
			else if (kind != FD_REPLAY || !s->replay.tap ||
				 !replay_tap_conn(node_replay(shim_node), s->replay.tap, &vs))
				continue;
			s->fork_conn = vs;
			/* Pairs with the acquire load in point_conns_at_fork(). */
			__atomic_store_n(&s->fork_gen, gen, __ATOMIC_RELEASE);
		}
	}
}

int point_conns_at_fork(int fd, struct viewstamp *vs)
{
	struct fd_slot *s = fd_lookup(fd);
	uint32_t gen = __atomic_load_n(&fork_gen, __ATOMIC_ACQUIRE);

	if (!s || !gen || __atomic_load_n(&s->fork_gen, __ATOMIC_ACQUIRE) != gen)
		return 0;
	*vs = s->fork_conn;
	return 1;
}
