/* Execution on a backup: committed entries are replayed into the local
 * server by acting as its client over loopback, one connection per conn_vs.
 *
 * Deterministic replay: entry i+1 is not made readable before the server
 * consumed entry i.  The shim inside the server reports what the server
 * accepted and read through a "tap" per replay connection, found by the
 * client's local port. */
#ifndef APUS_REPLAY_H
#define APUS_REPLAY_H

#include <stdint.h>
#include <sys/types.h>

#include "entry.h"

struct node;
struct replay;
struct replay_tap;

struct replay *replay_new(struct node *n);

/* Executes committed entry E.  Returns 1 when done, 0 when it waits for the
 * server (call again with the same entry).  Never blocks. */
int replay_exec(struct replay *r, const struct entry_hdr *e);

/* Reads what the server wrote back on the replay connections. */
void replay_drain(struct replay *r);

/* Replay connections open now. */
unsigned replay_conn_count(const struct replay *r);

/* --- Called by the shim from the server's threads --- */

/* The server accepted FD from PEER_ADDR:PEER_PORT; returns its tap if it is
 * one of our replay connections, NULL for anybody else. */
struct replay_tap *replay_tap_claim(struct replay *r, int fd, const void *peer_sockaddr,
				    uint16_t peer_port);
/* The server read N > 0 bytes, or saw end of stream (N == 0). */
void replay_tap_read(struct replay *r, struct replay_tap *t, ssize_t n);
/* The server closed its end. */
void replay_tap_close(struct replay *r, struct replay_tap *t);

#endif
