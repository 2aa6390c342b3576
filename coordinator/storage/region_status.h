/* A node's status page: what the node publishes about itself in its
 * region's control page, read from other processes while it writes: by
 * `apus status`, the metrics endpoint (metrics.h), `apus verify`
 * (checks.h) and the guard.  Written by the node only; no peer writes here
 * (region_peer_may_write).  It lies at REGION_STATUS_OFF of the control
 * page (region.h has the map).  `pid` and `role` are read by the peers on
 * this host too (transport_shm.c) and by region_collect.
 *
 * A new field goes at the end of struct node_status, in the room up to
 * REGION_STATUS_SIZE: no field before it moves, so nothing else in the
 * page does, and there is no version to bump (a new field reads 0 in a
 * page that predates it: a region starts zeroed).  A field is never moved
 * or removed in place; one that retires becomes padding. */
#ifndef APUS_REGION_STATUS_H
#define APUS_REGION_STATUS_H

#include <stdint.h>

#include "common/config.h"

struct region_ctl;

/* What a node is doing: the node's own n->role, and status.role. */
enum node_role {
	ROLE_DOWN = 0,
	ROLE_LEADER = 1,
	ROLE_BACKUP = 2,
	ROLE_FAILED = 3,
	ROLE_CANDIDATE = 4,	/* standing for election */
	ROLE_DEPOSED = 5,	/* a leader that learned of a newer view: re-executing */
	ROLE_REMOVED = 6,	/* no member of the cluster any more (members.h) */
};

#define STATUS_LAT_BUCKETS 15

/* One finished output check of a replayed connection (coordinator/storage/checks.h):
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
	/* The entry whose membership is in force here (0: the config
	 * file's), and the leader's change proposed but not yet in force
	 * (0: none).  Written by the node (members.c); members_idx is read
	 * back by it, so a membership entry executed again is not adopted
	 * twice. */
	uint64_t members_idx;
	uint64_t member_pending;
};

/* Where the status page starts in the control page, and how far it may
 * grow (region.h has the map). */
#define REGION_STATUS_OFF 2088
#define REGION_STATUS_SIZE 2208

_Static_assert(sizeof(struct node_status) <= REGION_STATUS_SIZE, "the status page is full");

/* The status page of the control page CTL; const when CTL is. */
#define region_status(ctl)                                                                   \
	_Generic((ctl),                                                                      \
		struct region_ctl *: (struct node_status *)((char *)(ctl) + REGION_STATUS_OFF), \
		const struct region_ctl *: (const struct node_status *)((const char *)(ctl) +  \
									 REGION_STATUS_OFF))

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

/* A counter of struct node_status: nothing is ordered by it. */
static inline void status_add(uint64_t *p, uint64_t v)
{
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

#endif
