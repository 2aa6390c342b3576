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
 * check.  The socket then carries only the connection's open and close. */
#ifndef APUS_REPLAY_H
#define APUS_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

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

/* In-place reads.  Once the server watches a replay connection with epoll
 * (ON), the backup thread keeps the connection's bytes here instead of
 * sending them through the socket, and the shim serves the server's reads
 * from here and reports the connection ready itself. */
void replay_tap_watch(struct replay_tap *t, int on);
/* A read of T when its turn's bytes are held here: copies them into IOV,
 * returns 1 with *RET set; 0 when the read takes the socket path. */
int replay_take(struct replay *r, struct replay_tap *t, const struct iovec *iov, int iovcnt,
		ssize_t *ret);
/* The server writes IOV on replay connection T: fed to the output check
 * here rather than through the socket.  1 if taken (the write succeeded
 * whole), 0 for the socket path (the connection is gone). */
int replay_absorb(struct replay *r, struct replay_tap *t, const struct iovec *iov, int iovcnt);
/* The server's fds whose held turns come next, in turn order (each taken
 * whole frees the next): at most CAP, stopping before a second turn of
 * one fd.  Returns how many. */
int replay_ready_fds(struct replay *r, int *fds, int cap);
/* The eventfd to put in the server's epoll sets: readable when a held turn
 * may have become ready while the server slept. */
int replay_kick_fd(struct replay *r);
/* Before a server thread blocks in epoll_wait: 1 to block (it will be
 * kicked), 0 when a held turn is ready already.  After blocking: awake. */
int replay_server_sleep(struct replay *r);
void replay_server_awake(struct replay *r);

#endif
