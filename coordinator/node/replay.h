/* Execution on a backup: committed entries are replayed into the local
 * server by acting as its client over loopback, one connection per conn_vs.
 *
 * Deterministic replay: entry i+1 must not become readable by the server
 * before it consumed entry i.  The backup thread sends every committed
 * entry at once and appends it to a schedule; the shim inside the server
 * gates the server's reads of replay connections by that schedule: a read
 * of a connection whose turn it is not yet returns EAGAIN, and a read whose
 * turn it is takes at most the bytes of that turn.  The server thus consumes
 * the entries exactly in log order, without a handshake per entry between
 * the backup thread and the server's threads.
 *
 * In place: once the server watches a replay connection with epoll, its
 * bytes skip the socket.  The turn holds a copy, the shim copies it into
 * the server's read and reports the connection ready in epoll_wait() when
 * its turn comes; what the server writes back goes straight to the output
 * check.  The socket then carries only the connection's open and close.
 *
 * This header is the role thread's side (replay.c); the server's side,
 * what the shim calls, is turns.h (turns.c). */
#ifndef APUS_REPLAY_H
#define APUS_REPLAY_H

#include "coordinator/storage/entry.h"

struct node;
struct replay;

struct replay *replay_new(struct node *n);

/* Executes committed entry E: returns 1 when done, 0 when it must be called
 * again with the same entry (the server is behind).  Never blocks. */
int replay_exec(struct replay *r, const struct entry_hdr *e);

/* Housekeeping of the backup thread: reads the server's replies, skips
 * turns the server will never take, closes finished connections.  Returns
 * 1 while the server still has scheduled turns to take. */
int replay_maintain(struct replay *r);

/* How many client connections are open in the server (an ACCEPT executed,
 * its CLOSE not yet).  Role thread. */
int replay_open_conns(struct replay *r);
/* Connections it opened to the server that the server has not accepted
 * yet (in the listening socket's backlog). */
int replay_unaccepted(struct replay *r);

/* Connections whose server read input it has not answered yet (it wrote
 * nothing to them since), read recently on the log's clock: a request may
 * be half read, its rest still to come.  A recovery point (a snapshot of
 * the server's data, not of its buffers) there would lose that request
 * on a node that restarts from it.  FIRST (may be NULL) gets one of
 * them.  Role thread. */
int replay_mid_requests(struct replay *r, struct viewstamp *first);

/* How many turns the server has taken (or replay skipped) so far: moves
 * while the server works through what it was sent. */
uint64_t replay_turns_taken(struct replay *r);

#endif
