/* The node's internals, shared by the coordinator's own files (and the
 * white-box unit tests and benchmark): the struct, the role loops, the
 * log's walk, execution, checkpoints, snapshots, elections.  The shim
 * includes only node.h, where `struct node` is opaque. */
#ifndef APUS_NODE_INTERNAL_H
#define APUS_NODE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/clock.h"
#include "common/config.h"
#include "coordinator/storage/entry.h"
#include "coordinator/node/node.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/transport/transport.h"
#include "coordinator/storage/wal.h"

struct node_status;

/* Each module's state is a sub-struct of struct node, and its owners,
 * the threads that may touch it, are named once: in the comment at the
 * sub-struct's top.  The threads: the role thread (role_main: leader_run
 * or backup_run, and the execution, elections, checkpoints, membership
 * and snapshot answers they call), the server's threads (through node.h:
 * proposals, and the leader's server forking for a snapshot,
 * node_snapshot_fork), the snapshot thread (snapshot.c), the fsync
 * thread, the metrics thread, and the thread that calls node_start()
 * and node_stop() ("start-up": before the role thread runs). */

/* Leader proposals (leader.c; members.c).  The server's threads propose
 * (leader_submit, node_input_room: lock, last_idx, tail, self_acked; they
 * read view_start); the role thread, leading, syncs joining backups
 * (peer_inc, peer_seq, under lock), takes over (under lock) and proposes
 * membership (member_pending*), and executing a membership entry in any
 * role clears peer_inc (members_adopt); the leader's server forking for a
 * snapshot reads last_idx and tail under lock, the snapshot thread reads
 * tail (atomic); start-up sets view_start and the lock up.  `lock` orders
 * proposals: it covers slot reservation and the writes to peers, so every
 * backup receives entries in log order. */
struct node_lead {
	pthread_mutex_t lock;
	uint64_t last_idx;	/* under lock */
	uint64_t tail;		/* under lock: next free log position */
	uint64_t self_acked;	/* atomic: highest index this node persisted */
	/* atomic: the newest entry whose input the server was handed (what
	 * its replies may reflect; read-ahead entries count once taken) */
	uint64_t handed_idx;
	uint64_t view_start;	/* index of this view's first entry: commit counts from there */
	uint64_t peer_inc[APUS_MAX_NODES];	/* leader: incarnation each peer was synced for */
	uint64_t peer_seq[APUS_MAX_NODES];	/* and which of its joins */
	/* The role thread: the commit and view each peer's doorbell was last
	 * rung with for a heartbeat (leader_heartbeat). */
	uint64_t hb_rung_commit[APUS_MAX_NODES], hb_rung_view[APUS_MAX_NODES];
	/* Leader: its membership change proposed and not yet in force
	 * (entry index, 0: none), and the membership's text (members.c). */
	uint64_t member_pending;
	char *member_pending_text;
	size_t member_pending_len;
};

/* Execution of committed entries into the local server (any role;
 * the role thread only): node_execute, replay.c, leader.c's catch-up,
 * backup.c, and what checkpoint.c and snapshot.c's node_snapshot_poll
 * read of it.  Start-up sets it before the role thread runs
 * (node_snapshot_load; node_app_reset reads seed_idx).  Other threads
 * only read, atomically: applied (node_update_status; the snapshot
 * thread), pos (the server's threads proposing: leader_reclaim_pos; the
 * snapshot thread), pos, idx and view (node_log_end: any thread); and
 * the replay pointer, set at start-up (the shim, through node_replay). */
struct node_exec {
	struct replay *replay;
	uint64_t applied;	/* atomic */
	uint64_t seed_idx;	/* our server started from a peer's snapshot at this entry (0: no) */
	uint64_t pos, idx, view;	/* next entry to execute; view of the last one */
	/* A new leader's catch-up (leader.c; the role thread only): when its
	 * server last made progress, and what progress (entries executed plus
	 * turns taken).  After a step-down for making none, it does not stand
	 * before no_stand_until_ns (backup.c). */
	uint64_t catch_up_ns, catch_up_mark;
	uint64_t no_stand_until_ns;
};

/* Checkpoints (checkpoint.c; the role thread only), set up at start-up
 * (node_checkpoint_init).  `hold` is also read by node_execute and
 * node_snapshot_poll (the role thread), the snapshot thread (due) and the
 * leader's server forking for a snapshot (node_snapshot_fork). */
struct node_ckpt {
	uint64_t hold;		/* request we hold execution for (0: none) */
	uint64_t hold_ns;
	uint64_t restore_seen;	/* the guard's restore generation as we know it */
};

/* Snapshots of itself (snapshot.c): the snapshot thread asks, the role
 * thread (backup: node_snapshot_poll) or the server's fork (leader:
 * node_snapshot_fork) answers; the server's threads read state
 * (node_snapshot_armed), the role thread state and loading
 * (node_snapshot_holds, node_snapshot_running, node_snapshot_loading).
 * The recovery point (idx, pos) is set at start-up, by the snapshot
 * thread as it keeps points and by the role thread after a restore
 * (node_snapshot_reload); recoverable at start-up and by the role thread
 * (node_snapshot_check after a restore; a leader that steps down unable
 * clears it).  The role thread reads them (backup.c, election.c), the
 * server's threads proposing read pos (leader_reclaim_pos,
 * node_snapshot_floor).  The shim sets the hooks once
 * (node_set_input_pending, node_set_point_cut, node_set_point_conn); the
 * snapshot thread and the server's fork call them. */
struct node_snap {
	int state;		/* atomic: enum snap_state */
	int forks;		/* atomic: server forks while one was under way */
	uint64_t hold_ns;	/* role thread: when it began to hold */
	uint64_t drained_ns;	/* ... and when its server had taken every turn */
	uint64_t cap_idx, cap_pos, cap_view;	/* the state it holds */
	uint64_t cap_rand;	/* its generator's, at the fork (input_random_mark) */
	/* snapshot_connections = none: connections open when the role thread
	 * came to hold (it did not: no recovery point there). */
	int open_conns;
	/* Connections whose server was mid-request at the entry it came to
	 * hold (replay_mid_requests; no recovery point there), one of them,
	 * and since when points have been refused for that (role thread). */
	int mid_conns;
	struct viewstamp mid_vs;
	uint64_t mid_since_ns, mid_last_ns;
	/* Someone asked for a point (SNAPSHOT_REQUEST_FILE): it stands through
	 * refusals (a client mid-request) until one is taken or fails. */
	int asked;
	uint64_t idx, pos;	/* atomic: the recovery point (0: none) */
	int recoverable;	/* its snapshot and log rebuild its state (atomic) */
	/* atomic: snapshot_load_cmd has yet to put the recovery point into
	 * the server (execution waits); how often it failed so far. */
	int loading, load_failures;
	/* Set by the shim: whether read-ahead bytes wait for the server. */
	int (*input_pending)(void);
	int (*point_cut)(struct viewstamp *first);	/* node_set_point_cut */
	int (*point_conn)(int fd, struct viewstamp *vs);	/* node_set_point_conn */
};

/* Elections (election.c), and the views this node knew led
 * (node_set_role).  The role thread only, and start-up before it runs. */
struct node_elect {
	uint64_t answered[APUS_MAX_NODES];	/* last request of each candidate answered */
	uint64_t probed[APUS_MAX_NODES];	/* last pre-vote round of each answered */
	uint64_t max_seen;	/* highest view any peer told us of */
	/* 1 + the newest view whose leader this node knew (0: none yet), for
	 * status.leader_changes (node_set_role; the role thread only). */
	uint64_t led_views;
};

/* The node's threads.  Only the thread that calls node_start() and
 * node_stop(): node_start starts them (node_snapshot_start, metrics_start),
 * node_stop joins them. */
struct node_threads {
	pthread_t role;		/* the role thread */
	pthread_t sync;		/* fsync = batch */
	int sync_started;
	pthread_t metrics;	/* when metrics_port is set */
	int metrics_started;
	pthread_t snap;		/* when snapshot_cmd is set */
	int snap_started;
};

/* The node.  Its top-level words are shared by every role and module:
 * set at start-up, then read by any thread.  Those marked atomic are the
 * node's shared, atomic words, which change while it runs (quorum,
 * voters, members, role, leader, view, serving, commit, connected; and
 * stamp_ms, which both the leader's proposals and execution advance):
 * every role reads them, so no one module owns them.  Each module's own
 * state follows, in its sub-struct. */
struct node {
	struct apus_config cfg;
	int self;
	int quorum;		/* atomic: majority of the voters in force (members.c) */
	uint32_t voters;	/* atomic: bit per voting member */
	uint32_t members;	/* atomic: bit per member (voters and learners): who gets the log */
	int role;		/* atomic: enum node_role */
	int leader;		/* atomic: leader of `view`, -1 while unknown */
	uint64_t view;		/* atomic */
	int serving;		/* atomic: the leader's server is up to date: clients welcome */

	char *region;
	size_t region_size;
	int region_fd;
	struct wal wal;		/* the log's durable copy when the region is in memory */
	struct region_ctl *ctl;
	struct node_status *status;	/* region_status(ctl): the page it publishes */
	char *log;		/* region + ctl->log_off */
	uint64_t log_size;

	struct transport *tp;
	const struct transport_ops *ops;
	int stopping;
	uint64_t spin_ns;	/* how long a wait spins before it sleeps (APUS_SPIN_US) */
	uint64_t spin_max_ns;	/* how far a backup's spin may grow (APUS_SPIN_MAX_US) */
	uint64_t started_ns;
	uint64_t listen_ns;	/* when the server began to listen on its application port */
	struct node_threads threads;

	/* The last input clock stamp made (under lead.lock) or executed (the
	 * role thread, atomic): the next one is never below it
	 * (input_clock.h). */
	uint64_t stamp_ms;
	uint64_t commit;	/* atomic */
	uint32_t connected;	/* atomic bitmap: leader: peers synced to our log; backup: leader reached */

	struct node_lead lead;
	struct node_exec exec;
	struct node_ckpt ckpt;
	struct node_snap snap;
	struct node_elect elect;
};

/* Role loops: each returns when the role changes (or the node stops). */
void leader_run(struct node *n, int takeover);
void backup_run(struct node *n);
void node_update_status(struct node *n);
void node_persist(struct node *n, uint64_t pos, size_t len);
/* Writes the durable words (view, vote) and waits until they are on disk. */
void node_save_durable(struct node *n);
void node_set_role(struct node *n, int role, int leader, uint64_t view);

/* The entry at *POS with index IDX if it is whole, following a WRAP marker
 * to the next lap; NULL if it has not (fully) landed yet. */
const struct entry_hdr *node_entry_at(struct node *n, uint64_t *pos, uint64_t idx);
/* Whether that entry has landed, without checking its CRC: what a spin
 * looks at (agreeing on it checks the CRC). */
int node_entry_landed(struct node *n, uint64_t pos, uint64_t idx);

/* The end of this node's log as it lies now, scanning forward from the
 * executed prefix: the last entry's view and index and the position past
 * it.  Views never decrease along a log, so bytes of an older pass that
 * follow the real end are never taken for entries. */
void node_log_end(struct node *n, uint64_t *last_view, uint64_t *last_idx, uint64_t *end_pos);

/* Records the newest entry this node holds (see struct log_hint); 0
 * forgets it (the log was replaced from the leader's copy). */
void node_set_hint(struct node *n, uint64_t idx, uint64_t pos, uint64_t view);

/* Executes entries exec.idx..UPTO of the local log through replay; returns
 * 1 if it made progress.  Entries up to CHECKED were verified whole (CRC)
 * by this node already: only their canary is checked again.  Reports
 * applied positions to the leader (when it is not the leader itself). */
int node_execute(struct node *n, uint64_t upto, uint64_t checked);
/* Whether the server listens and has loaded what it loads by itself
 * (it waited in epoll_wait(), or SERVER_LOAD_NS passed since it
 * listened): replay may connect to it. */
int node_server_up(struct node *n);

/* checkpoint.c.  Init reads the restore generation at start; poll answers
 * the guard's checkpoint requests (holding execution while one is taken)
 * and returns 1 when this process was just restored from a checkpoint. */
void node_checkpoint_init(struct node *n);
int node_checkpoint_poll(struct node *n);

/* snapshot.c.  Start-up: loads the node's recovery point (recovery.h),
 * so execution starts past its entry, and puts its snapshot where the
 * server loads it.  Then, after the role is picked: whether the snapshot
 * and the log rebuild this node's state (n->snap.recoverable; a node that
 * cannot never stands for election). */
void node_snapshot_load(struct node *n);
void node_snapshot_check(struct node *n);
/* Start-up, before node_snapshot_load(): app_reset_cmd, when set.  0, or
 * -1 with ERR filled (the server must then serve nothing: its state is
 * not the one the log starts from). */
int node_app_reset(struct node *n, char *err, size_t errlen);
/* After a CRIU restore: the recovery point on disk may be newer than the
 * image's memory of it (snapshots taken since the dump).  A restart loads
 * that one, so it is the one reported for the log's reclamation; whether
 * this process may lead is judged from its server's state
 * (node_snapshot_check). */
void node_snapshot_reload(struct node *n);
/* Starts the thread that snapshots this node (when snapshot_cmd is set). */
int node_snapshot_start(struct node *n);
/* Role thread: answers the snapshot thread's hold (backup). */
void node_snapshot_poll(struct node *n);
/* Whether execution is held for a snapshot: a backup's being taken, or
 * the recovery point still being loaded into the server
 * (snapshot_load_cmd). */
int node_snapshot_holds(struct node *n);
/* Whether snapshot_load_cmd has yet to load the recovery point, and has
 * not failed yet (a leader waiting for it is not stuck). */
int node_snapshot_loading(struct node *n);
/* Whether a snapshot of this node is under way (its command and what the
 * server forked for it still run). */
int node_snapshot_running(struct node *n);

/* Leader: the quorum-th newest snapshot position of the cluster: log
 * before it is covered by a majority's snapshots.  UINT64_MAX without
 * snapshot_cmd (nothing to wait for). */
uint64_t node_snapshot_floor(struct node *n);

enum snap_state {
	SNAP_IDLE = 0,
	SNAP_HOLD,	/* backup: asked to hold execution */
	SNAP_HELD,	/* backup: held, its server took every turn sent */
	SNAP_ARMED,	/* leader: read-ahead paused, waiting for the server's fork */
	SNAP_FORKED,	/* the server forked: the state captured, execution goes on */
	SNAP_FAILED,	/* backup: could not hold (a checkpoint, or the server is slow) */
};

/* leader.c: proposes membership TEXT (members.c checked it) as one
 * entry, without waiting for room or commit.  0 with *IDX, or -EAGAIN
 * (the log is full) / -EPERM (not serving).  Role thread. */
int leader_propose_members(struct node *n, const char *text, size_t len, uint64_t *idx);

/* election.c.  Answers the vote requests in our region; MAY_VOTE says
 * whether we are without a live leader.  Returns 1 if it granted one. */
int election_answer(struct node *n, int may_vote);
/* Stands for the next view after a pre-vote round; returns 1 when this
 * node won (it then leads). */
int election_stand(struct node *n);
/* Whether a request or pre-vote waits for our answer. */
int election_pending(struct node *n);
/* The candidate asking us for a view newer than VIEW in earnest, or -1. */
int election_newer_request(struct node *n, uint64_t view);

static inline uint64_t node_log_off(const struct node *n, uint64_t pos)
{
	return REGION_CTL_SIZE + pos % n->log_size;
}

static inline int node_role(struct node *n)
{
	return __atomic_load_n(&n->role, __ATOMIC_ACQUIRE);
}

/* Whether PEER's acks make LEADER's quorum: the quorum-1 backups first
 * after the leader in node order.  They spin through a steady stream of
 * entries and are rung per entry; the others sleep between batches (see
 * spin.h and leader_ring()).  A 3-node cluster keeps one backup spinning,
 * not two: on a 2-core machine the second would starve the servers. */
static inline int node_acks_fast(const struct node *n, int leader, int peer)
{
	return (peer - leader - 1 + n->cfg.nnodes) % n->cfg.nnodes <
	       __atomic_load_n(&n->quorum, __ATOMIC_RELAXED) - 1;
}

#endif
