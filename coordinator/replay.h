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
 * the backup thread and the server's threads. */
#ifndef APUS_REPLAY_H
#define APUS_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "entry.h"

struct node;
struct replay;
struct replay_tap;

struct replay *replay_new(struct node *n);

/* Executes committed entry E: returns 1 when done, 0 when it must be called
 * again with the same entry (the server is behind).  Never blocks. */
int replay_exec(struct replay *r, const struct entry_hdr *e);

/* Housekeeping of the backup thread: reads the server's replies, skips
 * turns the server will never take, closes finished connections.  Returns
 * 1 while the server still has scheduled turns to take. */
int replay_maintain(struct replay *r);

/* --- Called by the shim from the server's threads --- */

/* The server accepted FD from PEER_ADDR:PEER_PORT; returns its tap if it is
 * one of our replay connections, NULL for anybody else. */
struct replay_tap *replay_tap_claim(struct replay *r, int fd, const void *peer_sockaddr,
				    uint16_t peer_port);
/* Before the server reads a replay connection: how many bytes it may read
 * now (at most WANT); 0 when it is not this connection's turn. */
size_t replay_gate(struct replay *r, struct replay_tap *t, size_t want);
/* After it read: N > 0 bytes, or end of stream (N == 0). */
void replay_tap_read(struct replay *r, struct replay_tap *t, ssize_t n);
/* The server closed its end. */
void replay_tap_close(struct replay *r, struct replay_tap *t);

#endif
