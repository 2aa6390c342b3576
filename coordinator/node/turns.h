/* The server's side of replay: the one contract between the shim and a
 * node's replay (replay.h is the role thread's side).  A backup's role
 * thread sends each committed entry to the local server over a loopback
 * replay connection and appends a turn to a schedule; the shim, inside
 * the server, makes the server take the turns in schedule order, which is
 * the log's order.
 *
 * Who calls what, from which threads.  Every call below is made by the
 * shim from one of the server's own threads (any of them; never from the
 * node's role thread), with R the node's replay (node_replay()):
 *   accept()     replay_tap_claim: is the new fd one of ours?  Its tap is
 *                then the fd's for the connection's life.
 *   a read of a replay connection (read, readv, recv*, but a peek):
 *                replay_read, with the shim's socket read for its family.
 *                (Inside: replay_take serves the turn's bytes held here,
 *                else replay_gate says how much the socket may give now,
 *                replay_gate_wait waits for the turn of a connection no
 *                epoll set watches, and replay_tap_read accounts what the
 *                socket gave; the unit tests call these steps one by one.)
 *   a write      replay_absorb: in place, the output goes to the check;
 *                either way it answers what the server read of it.
 *   epoll_ctl()  once per set, replay_waker_open and the waker's eventfd
 *                (replay_waker_fd) into the set; then replay_tap_watch
 *                with the set's waker (the shim's read-ahead lock held).
 *   epoll_wait() replay_ready_fds with the set's waker: what to report
 *                ready; before blocking replay_server_sleep, and
 *                replay_server_awake after blocking if it said to block.
 *   close()      replay_tap_close; of a set, replay_waker_close.
 *
 * What the order guarantees.  A read of a replay connection gets bytes
 * only when that connection's turn is at the head of the schedule, and no
 * more than the turn holds; its end of stream is a turn of its own; so the
 * server consumes the entries exactly in log order, per connection and
 * across connections, without a handshake per entry.  A turn the leader's
 * server read only after it had answered the connection's input before
 * (ENTRY_F_ANSWERED) waits, at the head, until ours has written to the
 * connection since it last read from it (turn_waits_answer): a server
 * that reads a connection's next request while another thread still runs
 * its last one gets it no earlier than the leader's did.  What the reply
 * needs was read before it on the leader, so it is ahead in the log.  A turn advances the
 * head when it is taken whole (from whichever thread took it; the head
 * moves by CAS), and wakes the role thread when it waits for the server.
 * The role thread skips turns of taps the server closed, and a turn left
 * untaken for long (it logs that: those bytes may then be read out of
 * turn).  The calls never block, but replay_take and replay_absorb take a
 * short lock shared with the role thread.
 *
 * Multi-threaded servers.  Each epoll set of the server's that watches
 * replay connections has a waker of its own (an eventfd in that set), and
 * a connection's turn wakes only the set that watches the connection: the
 * thread that can take the turn, never a thread that would swallow the
 * wake-up and sleep on.  A thread reports ready only the turns of its own
 * set, from the head on, so whichever thread owns the head's connection
 * takes it, and the next turn's set is woken as the head moves (by the
 * thread that took the turn).  The order stays the log's, across all the
 * server's threads: what that does and does not guarantee about execution
 * is in doc/operator-guide.md ("Multi-threaded servers"). */
#ifndef APUS_TURNS_H
#define APUS_TURNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "coordinator/storage/entry.h"

struct replay;
struct replay_tap;

/* The socket side of a server's read of a replay connection, as the shim
 * makes it for the libc family the server called. */
struct replay_sock {
	/* Reads at most CAP bytes from the socket into the caller's buffers:
	 * what the libc call returns (errno set on -1). */
	ssize_t (*read)(void *arg, size_t cap);
	/* Whether the read would block (a blocking socket, no MSG_DONTWAIT);
	 * asked only when a read not WATCHED must wait for its turn. */
	int (*blocks)(void *arg);
	void *arg;
	int watched;	/* an epoll set watches the connection: it reports turns */
};

/* A read of replay connection T by the server into IOV (not a peek: that
 * goes to the socket as it is): served from its turn's bytes held here, or
 * from the socket (SOCK, at most what the turn holds) when the turn heads
 * the schedule, waiting for it first if no epoll set watches T; what the
 * server consumed is accounted.  Returns what the read returns; -1 with
 * errno EAGAIN when it is not T's turn. */
ssize_t replay_read(struct replay *r, struct replay_tap *t, const struct iovec *iov, int iovcnt,
		    const struct replay_sock *sock);

/* The server accepted FD from PEER_ADDR:PEER_PORT; returns its tap if it is
 * one of our replay connections, NULL for anybody else. */
struct replay_tap *replay_tap_claim(struct replay *r, int fd, const void *peer_sockaddr,
				    uint16_t peer_port);
/* Before the server reads a replay connection's socket: how many bytes it
 * may read now (at most WANT); 0 when it is not this connection's turn,
 * or when the turn's bytes are held here (replay_take serves them: the
 * socket may hold the connection's end of stream already, and reading it
 * out of turn would end the connection before its input). */
size_t replay_gate(struct replay *r, struct replay_tap *t, size_t want);
/* replay_gate_wait's answer when the turn that came is held here: the read
 * is for replay_take. */
#define REPLAY_GATE_HELD ((size_t)-1)
/* replay_gate() said 0 for a connection no epoll set watches (a thread
 * per connection, poll(), blocking reads): waits for the turn, until it
 * comes if BLOCKING, else up to 10 ms (none when the head's connection was
 * last read by this thread: only it can take that turn); returns
 * replay_gate()'s answer then, or REPLAY_GATE_HELD.  Not for connections in an epoll set:
 * epoll reports their turns. */
size_t replay_gate_wait(struct replay *r, struct replay_tap *t, size_t want, int blocking);
/* For a server that waits in poll() rather than epoll (preload/poll.c):
 * 1 when a read of T now would get bytes or its end (its turn is at the
 * head, or bytes of it are free), 0 when the read would be refused.  No
 * side effects, unlike replay_gate. */
int replay_tap_ready(struct replay *r, struct replay_tap *t);
/* After it read: N > 0 bytes, or end of stream (N == 0). */
void replay_tap_read(struct replay *r, struct replay_tap *t, ssize_t n);
/* The server closed its end. */
void replay_tap_close(struct replay *r, struct replay_tap *t);
/* The connection T serves now: 1 with *VS, or 0 (none, or closed). */
int replay_tap_conn(struct replay *r, struct replay_tap *t, struct viewstamp *vs);

/* thread_order = requests: the calling thread asks for input again (it
 * waits for events, or reads after it wrote its reply): the request it
 * took its last turn for is done, and the head may move on.  (Its read of
 * another connection ends the request too, and so does its close of the
 * request's connection (replay_tap_close); a read of the same one goes on
 * with it when the next turn is that connection's: replay_gate and
 * replay_take see to those.)  Until then
 * (or 50 ms: replay.c's ORDER_STALL_NS) no thread takes the next turn. */
void replay_request_done(struct replay *r);

/* In-place reads.  Once the server watches a replay connection with epoll
 * (ON), the backup thread keeps the connection's bytes here instead of
 * sending them through the socket, and the shim serves the server's reads
 * from here and reports the connection ready itself. */
void replay_tap_watch(struct replay *r, struct replay_tap *t, int on, int waker);
/* A read of T when its turn's bytes are held here: copies them into IOV,
 * returns 1 with *RET set; 0 when the read takes the socket path. */
int replay_take(struct replay *r, struct replay_tap *t, const struct iovec *iov, int iovcnt,
		ssize_t *ret);
/* The server writes IOV on replay connection T (any write, before it
 * reaches the socket: it answers the input read so far): fed to the output
 * check (unless CHECK is 0: a greeting the checker skips) here rather than
 * through the socket.  1 if taken (the write succeeded whole), 0 for the
 * socket path (the connection is gone). */
int replay_absorb(struct replay *r, struct replay_tap *t, const struct iovec *iov, int iovcnt,
		  int check);
/* The fds of WAKER's set whose held turns come next, in turn order (each
 * taken whole frees the next): at most CAP, stopping before a second turn
 * of one fd and at a turn of another set.  Returns how many. */
int replay_ready_fds(struct replay *r, int waker, int *fds, int cap);
/* A waker for an epoll set of the server's: its id (0, the common waker,
 * when all are taken); given back when the set closes. */
int replay_waker_open(struct replay *r);
void replay_waker_close(struct replay *r, int waker);
/* Its eventfd, to put in the set: readable when a held turn of the set
 * may have become ready while a thread slept on it. */
int replay_waker_fd(struct replay *r, int waker);
/* Before a server thread blocks in epoll_wait on WAKER's set: 1 to block
 * (it will be kicked), 0 when a held turn is ready already.  After
 * blocking: awake. */
int replay_server_sleep(struct replay *r, int waker);
void replay_server_awake(struct replay *r, int waker);

#endif
