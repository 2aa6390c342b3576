/* What the shim may ask of its node: the node's public header.  The shim
 * creates exactly one node per server process (node_start) and calls
 * node_propose from the server's own threads when it leads.  `struct node`
 * is opaque here: the shim reads its state through the accessors below.
 * The coordinator's own files include node_internal.h (the struct, the
 * role loops, elections, checkpoints, snapshots).
 *
 * Roles (design §6): a node follows the leader of its view as a backup; a
 * backup that suspects its leader stands for election (election.c); the
 * winner brings its own server up to date from its log (the takeover),
 * then serves; a leader that learns of a newer view is deposed and has its
 * server re-executed (node_reexec_hook).  One role thread runs all of it. */
#ifndef APUS_NODE_H
#define APUS_NODE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/config.h"
#include "coordinator/storage/entry.h"

struct node;
struct replay;

/* Called (from the role thread) when this node's server must start afresh
 * and replay the log ("rebuild" is apus rebuild's word: from a peer): a deposed leader's server may have seen what the new view
 * lost.  The shim re-executes the server; it does not return on success. */
extern void (*node_reexec_hook)(struct node *n);

/* Starts node SELF of the cluster in CONFIG_PATH inside this process.
 * Returns the node (its threads running) or NULL with *ERR describing why. */
struct node *node_start(const char *config_path, int self, char *err, size_t errlen);

/* Stops N's threads (role, fsync, snapshot, metrics) and waits up to
 * WAIT_MS for each to end.  Returns 0 once all ended, -1 (logged) if one
 * did not.  A server never calls it (its process's end stops the node);
 * tests do, before the next cluster or before removing N's files.  N's
 * mappings and memory stay: N may be read after it stopped. */
int node_stop(struct node *n, int wait_ms);

/* Leader: replicates one inbound event and returns once a majority holds it.
 * ACCEPT names a new connection (CONN is ignored; the entry's viewstamp is
 * returned in *VS); RECV carries LEN bytes from IOV; CLOSE ends CONN.
 * FLAGS: entry.h's ENTRY_F_*.  Returns 0, or -EPERM when this node does
 * not lead (or was deposed while it waited: then nothing may be
 * answered). */
int node_propose(struct node *n, int type, int flags, struct viewstamp conn,
		 const struct iovec *iov, int iovcnt, size_t len, struct viewstamp *vs);

/* One event of a batch for node_propose_batch. */
struct proposal {
	int type;
	int flags;		/* entry.h's ENTRY_F_* */
	struct viewstamp conn;
	const struct iovec *iov;
	int iovcnt;
	size_t len;
	uint64_t stamp_ms;	/* out: its input clock stamp (input_clock.h) */
	uint64_t idx;		/* out: its (last) entry's index */
};

/* Leader: replicates COUNT events (never ACCEPTs) in this order, ringing
 * the backups once, and returns once a majority holds all of them (with
 * commit_wait = reply: at once).  0 or -EPERM as node_propose. */
int node_propose_batch(struct node *n, struct proposal *p, int count);

/* Leader: the input clock stamp of the entry the calling thread proposed
 * last (input_clock.h). */
uint64_t node_proposed_stamp(void);
/* ... and the index of its last entry (the key of the random numbers the
 * server draws while it handles it, input_random.h). */
uint64_t node_proposed_idx(void);

/* Leader: whether the log has room for a client's input now (waiting up
 * to WAIT_US for it).  A server thread that finds none should not read
 * (a non-blocking socket's reader gets EAGAIN): what frees the log may be
 * the leader's own snapshot, which the server takes on that very thread
 * (a fork), so a reader blocked on room could wait for ever.  The rest of
 * a request (REST: a client the server read from and has not answered)
 * may use a reserve that new requests leave free: a recovery point waits
 * for the requests read in part to end (answers.c, snapshot.c), and those
 * must not wait for the point. */
int node_input_room(struct node *n, int wait_us, int rest);

/* Leader: logs LEN bytes of DATA as an entry of TYPE without waiting for
 * it to commit, nor for room (the checker's output checkpoints).  0, -EPERM,
 * or -EAGAIN when the log is short of room (the record is left out). */
int node_record(struct node *n, int type, const void *data, size_t len);

/* Leader with commit_wait = reply: returns 0 once every input the server
 * was handed so far is committed, so a reply never reveals state a
 * failover could lose; -EPERM if the node was deposed first (the reply
 * must not leave).  Entries read ahead and not yet handed (the next
 * batch, proposed while replies of the last one leave) are not waited
 * for: nothing the server wrote can depend on them. */
int node_wait_output(struct node *n);

/* Leader: the server was handed the input of entry IDX (node_propose's
 * entries are handed as they return; read-ahead's when the server takes
 * them).  What node_wait_output waits for; nothing with commit_wait = read. */
void node_input_handed(struct node *n, uint64_t idx);

/* Whether the node takes application clients now (leads and is serving). */
int node_serving(struct node *n);

/* The shim's fork(), in the parent before the fork: a snapshot under way
 * learns the state the server's forked child holds.  Returns 1 when the
 * child is the snapshot's (a snapshot is under way: the server forks one
 * child at a time; or a guard holds the node for a snapshot of its own),
 * 0 otherwise. */
int node_snapshot_fork(struct node *n);
/* In a child the server forked: closes the node's sockets (peer and
 * metrics ports), which the child must not keep from a node restarted or
 * re-executed while it runs. */
void node_forget_in_child(struct node *n);
/* Leader: whether read-ahead must pause for a snapshot. */
int node_snapshot_armed(struct node *n);

/* --- Accessors: what the shim reads of its node --- */

/* The node's configuration (fixed once node_start returned). */
const struct apus_config *node_config(const struct node *n);
/* The application port of this node (the server's clients connect there). */
int node_app_port(const struct node *n);
/* This node's id, and the leader of its view as it knows it (-1 while
 * unknown). */
int node_self(const struct node *n);
int node_leader(struct node *n);
/* Execution into the local server (replay.h): the turns the shim hands it. */
struct replay *node_replay(struct node *n);
/* Sets the shim's answer to "do read-ahead bytes wait for the server?"
 * (a snapshot of the leader waits until none do). */
void node_set_input_pending(struct node *n, int (*fn)(void));
/* ... and to "how many clients' requests did the leader's snapshot fork
 * find read in part?" (preload/answers.c; such a point is refused). */
void node_set_point_cut(struct node *n, int (*fn)(struct viewstamp *first));
/* The shim's answer to "which connection did the server's descriptor FD
 * serve at the snapshot fork": 1 with *VS, or 0 (sessions.h). */
void node_set_point_conn(struct node *n, int (*fn)(int fd, struct viewstamp *vs));

/* What the shim saw of its server, for the status page: the server
 * listens on the application port (now); its listening thread waits for
 * events (it is done loading its state); COUNT clients were refused. */
void node_app_listening(struct node *n);
void node_app_ready(struct node *n);
void node_refused_clients(struct node *n, uint64_t count);
/* thread_order = requests: a request ran past the bound (the leader's
 * token was taken from it). */
void node_order_stalled(struct node *n);

#endif
