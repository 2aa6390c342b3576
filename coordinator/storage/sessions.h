/* A recovery point's client sessions: what a connection open at the point
 * carried in the server besides its data (a Redis client's SELECTed
 * database).  A node that starts from the point replays input of such a
 * connection on a connection of its own (replay.c, adopt()); without its
 * session, a SET after a SELECT 7 would land in database 0.
 *
 * snapshot_cmd may write, to the file named by $APUS_SESSIONS_FILE, one
 * line per connection whose session differs from a fresh one:
 *
 *     <fd> <prelude, in hex>
 *
 * the server's descriptor of it at the fork, and the input that puts a
 * fresh connection in that state (apps/redis/snapshot.sh: "SELECT 7").
 * The node turns each descriptor into the connection it served at the
 * fork (the shim kept them: node_set_point_conn; so only a command that
 * makes the server fork may name sessions) and keeps, beside the
 * recovery point of entry <index>,
 *
 *     <data_dir>/apus.sessions.<index>   lines "<view> <idx> <prelude in hex>"
 *
 * written before the point is committed, so a committed point always has
 * its file (none: no session to carry).  A node replaying input of a
 * connection open before its point sends the prelude first; its replies
 * go where that connection's output goes on a replayed connection: to the
 * output check, which skips such connections. */
#ifndef APUS_SESSIONS_H
#define APUS_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "coordinator/storage/entry.h"

#define SESSIONS_ENV "APUS_SESSIONS_FILE"
#define SESSIONS_NEW "apus.sessions.new"

/* Turns what snapshot_cmd wrote (SESSIONS_NEW in NODE's data directory)
 * into the file of the point at entry INDEX; FD_CONN names the connection
 * a descriptor served at the fork.  Returns how many sessions it kept (0:
 * the command wrote none), or -errno. */
int sessions_keep(const struct apus_config *cfg, int node, uint64_t index,
		  int (*fd_conn)(int fd, struct viewstamp *vs));

/* Removes the files of points other than the one at entry INDEX. */
void sessions_prune(const struct apus_config *cfg, int node, uint64_t index);

struct sessions;

/* The sessions of NODE's point at entry INDEX (an empty set when it has
 * none); NULL only when memory ran out. */
struct sessions *sessions_load(const struct apus_config *cfg, int node, uint64_t index);

/* Connection VS's prelude and its length, or NULL. */
const char *sessions_prelude(const struct sessions *s, struct viewstamp vs, size_t *len);

void sessions_free(struct sessions *s);

#endif
