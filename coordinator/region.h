/* The registered region every replica exposes to its peers: a control page
 * followed by the circular log.  It is a MAP_SHARED mapping of a file in
 * region_dir (a memory file system, /dev/shm by default) that
 * <data_dir>/apus.region links to, so peers on this host and `apus status`
 * find it by the data directory; its durable copy is <data_dir>/apus.wal
 * (wal.h).  With region_dir = none, or no memory file system, apus.region
 * is the file itself and the log reaches the disk by msync.
 *
 * Peers only ever touch this memory through the transport's one-sided
 * writes; every field written by a peer is a naturally aligned 64-bit word. */
#ifndef APUS_REGION_H
#define APUS_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define REGION_MAGIC 0x314e475253555041ULL	/* "APUSRGN1" */
#define REGION_VERSION 7	/* bumped at every change of the control page's layout */
#define REGION_CTL_SIZE 8192
#define REGION_FILE "apus.region"
#define WAL_FILE "apus.wal"
/* A node's recovery point in its data_dir (recovery.h): the snapshot and
 * the entry it stands at. */
#define SNAPSHOT_FILE "apus.snapshot"
#define SEED_FILE "apus.seed"

enum node_role {
	ROLE_DOWN = 0,
	ROLE_LEADER = 1,
	ROLE_BACKUP = 2,
	ROLE_FAILED = 3,
	ROLE_CANDIDATE = 4,	/* standing for election */
	ROLE_DEPOSED = 5,	/* a leader that learned of a newer view: re-executing */
	ROLE_REMOVED = 6,	/* no member of the cluster any more (members.h) */
};

/* What a backup reports about itself into the leader's region. */
struct peer_slot {
	uint64_t acked;		/* highest index persisted */
	uint64_t applied;	/* highest index executed on its server */
	uint64_t applied_end;	/* log position just past the last applied entry */
	uint64_t hb;		/* bumped with every report */
	/* The backup's recovery point (its own snapshot): the entry it
	 * covers and the log position past it.  The leader reclaims no log
	 * that a majority's snapshots do not cover.  snap_pos written last. */
	uint64_t snap_idx;
	uint64_t snap_pos;
	/* Join: "I follow you in join_view; copy me your log from my
	 * applied_end on; my own log ends with entry join_end_idx (of view
	 * join_end_view, at join_end_at)".  One write, join_view last. */
	uint64_t join_end_idx;
	uint64_t join_end_view;
	uint64_t join_end_at;
	uint64_t join_applied;
	uint64_t join_applied_end;
	uint64_t join_inc;	/* the backup's region incarnation */
	uint64_t join_seq;	/* which join of that incarnation: each is answered */
	uint64_t join_view;
};

/* What node k writes into every peer's region while it leads view `view`:
 * one slot per writer, so a deposed leader can never overwrite the words
 * of its successor.  hb and view go as one write, view last. */
struct lead_slot {
	uint64_t commit;
	uint64_t hb;
	uint64_t view;
	uint64_t pad;
};

/* Written by the leader into a backup's region once it copied its log
 * there from `from_pos` on: entries up to sync_idx are the leader's, any
 * later one must carry `view`.  One write, view last.
 * With from_pos = SYNC_BEHIND the leader's log no longer holds what the
 * backup needs; from_idx is then the end of the backup's own log when the
 * leader holds that same entry (0: it does not), and sync_idx the commit
 * index: the backup's own log is the leader's up to from_idx, so it may
 * execute it up to both and join again from there (Raft's log matching). */
struct sync_words {
	uint64_t from_pos;
	uint64_t from_idx;
	uint64_t sync_idx;
	uint64_t inc;		/* the backup incarnation this copy was made for */
	uint64_t seq;		/* and its join */
	uint64_t view;
};

#define SYNC_BEHIND UINT64_MAX

/* A candidate's vote request, written by candidate k into elect[k] of
 * every peer.  One write, view last. */
struct elect_req {
	uint64_t last_view;	/* of the candidate's last log entry */
	uint64_t last_idx;
	uint64_t probe;		/* nonzero: a pre-vote round, binding nobody */
	uint64_t view;		/* the view it stands for */
};

/* A voter's answer, written by voter k into vote[k] of the candidate:
 * `granted` is the view it votes for this candidate in (0: refused);
 * `seen` the highest view the voter knows, so a candidate behind learns it;
 * `snap_pos` its recovery point, so the winner knows from the start how
 * much log a majority's snapshots cover. */
struct vote_slot {
	uint64_t seen;
	uint64_t snap_pos;	/* the voter's recovery point (see peer_slot) */
	uint64_t granted;
};

/* A voter's answer to a pre-vote round, written into probe[k] of the
 * candidate: would it vote for that view now?  round is written last. */
struct probe_answer {
	uint64_t seen;		/* the newest view the voter knows of */
	uint64_t ok;
	uint64_t round;
};

/* Written by this node only and kept across restarts (the region file is
 * the durable state); a vote is on disk before it is sent. */
struct durable {
	uint64_t view;		/* the view this node last led or followed */
	uint64_t voted_view;	/* highest view it voted in (for itself or another) */
	uint64_t voted_for;
	uint64_t pad;
};

/* The newest entry this node holds (written by itself as it persists
 * entries), so the log's end is found from there even when the node's
 * server cannot reach it (its snapshot is older than its log's start). */
struct log_hint {
	uint64_t idx;
	uint64_t pos;
	uint64_t view;
};

#define STATUS_LAT_BUCKETS 15

/* One finished output check of a replayed connection (coordinator/checks.h):
 * the leader's final mark against this replica's output.  Written by the
 * node's replay only; `seq` is published last and cleared first, so a
 * reader that sees the same nonzero seq before and after copying the rest
 * holds a whole entry. */
struct check_result {
	uint64_t seq;		/* the check's number (1, 2, ...); 0 while being written */
	uint64_t conn_view, conn_idx;	/* the connection's viewstamp */
	uint64_t leader_off, leader_crc;	/* the leader's whole output: length, CRC-64 */
	/* Equal: leader_off; differs: the mark where the difference showed
	 * (it lies in the OUT_FOLD bytes before); incomplete: how much this
	 * replica's server wrote.  replica_crc: its CRC-64 there. */
	uint64_t at;
	uint64_t replica_crc;
	uint32_t verdict;	/* enum out_verdict (checker/outcheck.h) */
	uint32_t pad;
};

#define CHECKS_KEEP 8	/* the last checks kept (the control page has no room for many) */

/* Written by this node only, read by the CLI. */
struct node_status {
	uint64_t pid;
	uint64_t view;
	uint64_t commit;
	uint64_t applied;
	uint64_t log_pos;	/* leader: next free position; backup: next read */
	uint64_t reclaim_pos;	/* leader: log before this position is free */
	uint64_t updated_ms;	/* CLOCK_REALTIME, refreshed every heartbeat */
	uint64_t refused_clients;
	int32_t role;
	int32_t leader;
	uint32_t ready;		/* leader: every peer reached; backup: leader reached */
	uint32_t app_listening;	/* the server listens on its application port */
	uint32_t peers_connected;	/* bit per node */
	uint32_t unhealthy;	/* output diverged and divergence = unhealthy */
	uint64_t divergences;	/* connections whose output differed from the leader's */
	/* thread_order = requests: requests that ran past the 50 ms bound,
	 * so that the next one started beside them (doc/operator-guide.md,
	 * "Multi-threaded servers"). */
	uint64_t order_stalls;
	char error[128];	/* why the node failed, when role == ROLE_FAILED */
	/* Backup: how long the leader's heartbeat word has not moved, and
	 * whether that is longer than suspect_ms (the election's trigger). */
	uint64_t leader_hb_age_ms;
	uint32_t suspects_leader;
	/* Backup: the leader's log no longer holds the entries this node
	 * needs to catch up: it must be rebuilt from a peer (apus rebuild). */
	uint32_t behind;
	uint32_t synced;	/* backup: the leader's copy of its log arrived */
	/* The server waits for events on the thread that listens: it is done
	 * loading its state (Redis answers -LOADING to what comes before). */
	uint32_t app_ready;
	/* Backup: its latest join (peer_slot.join_seq).  The region outlives
	 * a CRIU restore: a restored process joins with a newer one, so no
	 * answer to its dead predecessor's joins can pass for its own. */
	uint64_t join_seq;
	/* Its recovery point: the snapshot it would restart from (0: the
	 * empty server) and whether its log reaches from there to its end. */
	uint64_t snap_idx;
	uint64_t snap_pos;
	uint64_t snap_count;	/* snapshots this process took of itself */
	uint64_t snap_ms;	/* how long the last one took */
	uint32_t recoverable;
	uint32_t snap_failures;	/* in a row */
	/* Counters since this process started, for `apus status` and the
	 * metrics endpoint (metrics.h); bumped with relaxed atomic adds
	 * (status_add) by whichever thread sees the event. */
	uint64_t snap_bytes;	/* size of the last snapshot */
	uint64_t proposals;	/* leader: events appended to the log */
	/* Leader: how long proposals (commit_wait = reply: held replies)
	 * waited for their commit; lat_bucket[i] counts waits in
	 * (bound[i-1], bound[i]] of metrics_lat_bounds, the last is +Inf. */
	uint64_t lat_bucket[STATUS_LAT_BUCKETS];
	uint64_t lat_sum_ns;
	uint64_t elections_won;
	uint64_t elections_lost;	/* stood (past the pre-vote) without winning */
	uint64_t leader_changes;	/* newer views with a known leader seen after the first */
	uint64_t sent_bytes[APUS_MAX_NODES];	/* bytes of writes into each peer's region */
	/* Backup: its last finished output checks, check[(seq - 1) %
	 * CHECKS_KEEP]; `checks` counts them (published after the entry),
	 * for apus verify. */
	uint64_t checks;
	struct check_result check[CHECKS_KEEP];
	/* Recovery points this process could not make: the last failure of
	 * its own snapshot (snapshot_cmd) and when (CLOCK_REALTIME), cleared
	 * by a success.  The guard's CRIU failures are in ckpt_words.  apus
	 * status shows them, and why writes wait. */
	char snap_error[256];
	uint64_t snap_error_ms;
	/* Leader: since when (CLOCK_REALTIME ms) its log has no room for a
	 * new event, because the recovery points that free it lag (0: it has
	 * room).  Written by the role thread. */
	uint64_t log_full_ms;
	/* Times this node stepped down as a new leader that could not
	 * execute its log (leader.c: leader_catch_up), and why it last did. */
	uint64_t stepdowns;
	char stepdown_reason[256];
};

/* The guard's checkpoint handshake (coordinator/checkpoint.c): the guard
 * asks with a new `req`; a backup answers `ack` = req once it holds
 * execution at entry `idx` (log position `pos`) and its server consumed
 * what was sent before (`drained`; bounded wait), so the CRIU image it
 * dumps next is that state; it executes again once `release` >= req.  A
 * leader answers `refused` (it is never paused).  `restore_gen` is bumped by
 * the guard before a criu restore: the restored process kept the older
 * value in its memory and so learns that it came back from an image. */
struct ckpt_words {
	uint64_t req;		/* guard */
	uint64_t release;	/* guard */
	uint64_t restore_gen;	/* guard */
	uint64_t ack;		/* node: the request answered */
	uint64_t idx;		/* node: last entry executed at the checkpoint */
	uint64_t pos;		/* node: log position past it */
	uint64_t view;		/* node: its view */
	uint64_t refused;	/* node: nonzero: ack refused the request (not a backup) */
	uint64_t drained;	/* node: its server had consumed every entry up to idx */
	/* node: a hold it left before its release (it was elected, or
	 * HOLD_MAX passed): that request.  Written before it executes
	 * anything past idx, so a snapshot taken under that hold (which then
	 * may hold more than idx) is known for what it is. */
	uint64_t broken;
	/* Guard (ckpt_take only), for the metrics endpoint: checkpoints
	 * taken of this region's process, the last one's dump time and
	 * image size. */
	uint64_t taken;
	uint64_t dump_ms;
	uint64_t image_bytes;
	/* Guard: checkpoints that failed in a row (0 after a success), the
	 * last failure's time (CLOCK_REALTIME ms) and its first line. */
	uint64_t failures;
	uint64_t error_ms;
	char error[256];
};

/* apus verify's question to a node, and the node's answer
 * (coordinator/checks.h).  The CLI writes want_*: "record the check of a
 * connection whose leader's final mark is (want_off, want_crc) here too",
 * want_seq (the question's number; 0: none) last.  The node writes
 * `answered` (the question it answers) and `answer` under answer.seq, as
 * an entry of status.check is written, with that check's number. */
struct verify_words {
	uint64_t want_off;	/* CLI */
	uint64_t want_crc;	/* CLI */
	uint64_t want_seq;	/* CLI */
	uint64_t answered;	/* node */
	struct check_result answer;	/* node */
};

/* A membership change asked of the leader (coordinator/members.h): the
 * CLI writes the membership it wants into <data_dir>/apus.members.want,
 * then want_seq (the question's number); the leader answers with
 * `answered` = want_seq last: the entry it proposed (idx) or why not
 * (err, a negative errno, and why). */
struct member_words {
	uint64_t want_seq;	/* CLI */
	uint64_t idx;		/* node */
	int64_t err;		/* node */
	uint64_t answered;	/* node */
	char why[96];		/* node */
};

struct region_ctl {
	uint64_t magic;
	uint32_t version;
	uint32_t node;
	uint64_t log_off;
	uint64_t log_size;
	uint64_t region_size;
	uint64_t incarnation;	/* differs on every start of the node */
	uint64_t pad0[2];

	struct durable dur;
	struct log_hint hint;

	/* lead[k]: written by node k while it leads. */
	struct lead_slot lead[APUS_MAX_NODES];
	struct sync_words sync;

	/* Written by backup k into the leader's region. */
	struct peer_slot peer[APUS_MAX_NODES];

	/* Elections: elect[k] written by candidate k, vote[k] by voter k. */
	struct elect_req elect[APUS_MAX_NODES];
	struct vote_slot vote[APUS_MAX_NODES];
	struct probe_answer probe[APUS_MAX_NODES];

	/* shm fencing: the incarnation of node k whose writes this region
	 * refuses (0: none); see transport_shm.c. */
	uint64_t fenced_inc[APUS_MAX_NODES];

	/* Doorbell: a writer bumps `bell` after its writes landed and wakes
	 * sleepers; see transport_shm.c. */
	uint32_t bell;
	uint32_t sleepers;
	uint64_t pad2[7];

	struct node_status status;

	struct ckpt_words ckpt;

	struct verify_words verify;

	struct member_words member;
	/* The entry whose membership is in force here (0: the config
	 * file's), and the leader's change proposed but not yet in force
	 * (0: none).  Written by the node. */
	uint64_t members_idx;
	uint64_t member_pending;

	/* The data directory whose apus.region link names this file (empty
	 * when too long): a file in region_dir that no link names any more
	 * (its data directory was deleted) is garbage (region_collect). */
	char owner[512];
};

_Static_assert(sizeof(struct region_ctl) <= REGION_CTL_SIZE, "control page overflows");

static inline size_t region_size_for(uint64_t log_size)
{
	return REGION_CTL_SIZE + log_size;
}

/* Whether node PEER may write [OFF, OFF+LEN) of a region of SIZE bytes:
 * the log, or inside one of the control page's parts the protocol has it
 * write (its own lead/peer/elect/vote/probe slot, the leader's sync
 * words).  The rest of the page (header, durable vote, status, doorbell,
 * guard words) is the node's own: a receiver that applies frames itself
 * (tcp) refuses a write there, which would corrupt the node. */
static inline int region_peer_may_write(int peer, uint64_t off, uint64_t len, uint64_t size)
{
	const struct {
		size_t at, len;
	} own[] = {
#define OWN(field, type) { offsetof(struct region_ctl, field) + (size_t)peer * sizeof(type), sizeof(type) }
		OWN(lead, struct lead_slot),
		OWN(peer, struct peer_slot),
		OWN(elect, struct elect_req),
		OWN(vote, struct vote_slot),
		OWN(probe, struct probe_answer),
#undef OWN
		{ offsetof(struct region_ctl, sync), sizeof(struct sync_words) },
	};

	if (off > size || len > size - off)
		return 0;
	if (off >= REGION_CTL_SIZE)
		return 1;
	if (peer < 0 || peer >= APUS_MAX_NODES)
		return 0;
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (off >= own[i].at && off - own[i].at + len <= own[i].len)
			return 1;
	return 0;
}

/* Where a new region came from (region_create). */
struct region_origin {
	int recovered;	/* the log and durable words of a previous process were kept */
	int from_wal;	/* ... taken from the durable copy (its memory file was gone) */
	int in_memory;	/* the region lives in region_dir: keep apus.wal (wal.h) */
};

/* Maps a new incarnation of NODE's region: the log and the durable words
 * of the region a previous process left (when it is valid and of the
 * configured size), or else of its durable copy, are kept, everything
 * else starts afresh.  The new file is built aside and renamed into place,
 * so peers still mapping the old one see a restart.  Returns 0 with
 * *BASE / *FD / *ORIGIN set, or -errno. */
int region_create(const struct apus_config *cfg, int node, void **base, int *fd,
		  struct region_origin *origin);

/* The file behind NODE's <data_dir>/apus.region (symlink resolved) into
 * OUT (PATH_MAX bytes).  Returns 0 or -errno. */
int region_backing_path(const struct apus_config *cfg, int node, char *out);

/* Maps NODE's region file read-only (just the control page) for inspection.
 * Returns the mapping or NULL with errno set.  Unmap with region_unmap_ctl. */
const struct region_ctl *region_map_ctl(const struct apus_config *cfg, int node);
void region_unmap_ctl(const struct region_ctl *ctl);
/* The same, writable: the guard's checkpoint words (struct ckpt_words). */
struct region_ctl *region_map_ctl_rw(const struct apus_config *cfg, int node);

/* Removes from DIR (a region_dir) what no node can use any more: the
 * temporary files of region_create whose process is gone, and regions
 * whose owner's data directory no longer links to them, unless their
 * process lives.  Logs each one; returns how many it removed. */
int region_collect(const char *dir);

/* The name `apus status` shows for a role. */
static inline const char *role_label(int role)
{
	switch (role) {
	case ROLE_LEADER: return "leader";
	case ROLE_BACKUP: return "backup";
	case ROLE_CANDIDATE: return "candidate";
	case ROLE_DEPOSED: return "deposed";
	case ROLE_REMOVED: return "removed";
	default: return "down";
	}
}

/* The node's doorbell; read it before checking for work (transport bell()). */
static inline uint32_t region_bell(struct region_ctl *c)
{
	return __atomic_load_n(&c->bell, __ATOMIC_SEQ_CST);
}

static inline uint64_t load64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void store64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* A counter of struct node_status: nothing is ordered by it. */
static inline void status_add(uint64_t *p, uint64_t v)
{
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

#endif
