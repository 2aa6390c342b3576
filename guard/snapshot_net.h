/* Snapshots for rebuilding a replica, served by a backup's guard over the
 * network (rebuild.h), so the node being rebuilt may live on another host.
 *
 * The guard of node M listens on M's address, guard_port (in M's network
 * namespace).  A client rebuilding node N connects and both prove they
 * know the cluster key (HMAC-SHA256 over both node ids and fresh nonces,
 * as the transports' admission does; nothing else is accepted), then M's
 * guard holds M, has its server write the snapshot, and sends (entry, log
 * position, view, size) and the file.  M stays held until the client says
 * N joined, hangs up, or 30 s passed: its position keeps the entries N
 * needs in the leader's log.  Integers go in this host's byte order: the
 * replicas of a cluster share an architecture (their logs do too). */
#ifndef APUS_GUARD_SNAPSHOT_NET_H
#define APUS_GUARD_SNAPSHOT_NET_H

#include <stdint.h>

#include "common/config.h"

struct snap_meta {
	uint64_t index, log_pos, view, bytes;
	uint64_t rand_mark;	/* the server's generator's mark (input_random.h) */
};

/* The guard of NODE: its listening socket (non-blocking), or -1 with ERR
 * set.  0 is never returned. */
int snapnet_listen(const struct apus_config *cfg, int node, char *err, size_t errlen);

/* Serves one connection waiting on LFD (the guard calls it again from its
 * loop, so that it looks at its node between two); a client has 2 s in
 * all to send its hello and prove the key.  LOG gets a line per request
 * and per client cut off by that limit. */
void snapnet_serve(const struct apus_config *cfg, int node, int lfd, void (*log)(const char *));

/* Fetches peer FROM's snapshot for NODE into the file DST (written aside
 * and renamed).  Returns the connection, which keeps FROM held until
 * snapnet_done; or -1 with ERR set. */
int snapnet_fetch(const struct apus_config *cfg, int node, int from, const char *dst,
		  struct snap_meta *m, char *err, size_t errlen);

/* Tells the peer's guard that the node joined (FROM may execute again). */
void snapnet_done(int fd);

#endif
