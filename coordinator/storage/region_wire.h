/* The wire ABI of a region: what peers write into each other's regions
 * and read there.  A region is a control page of REGION_CTL_SIZE bytes
 * followed by the circular log (entries: entry.h); struct region_ctl is
 * the control page's first part: its header, the durable words and the
 * log hint a restarted node keeps (region_create), the slots each peer
 * writes, the doorbell.  The rest of the page is the node's own and never
 * a peer's: its status page (region_status.h) and the mailboxes of the
 * CLI and the guard (region_mail.h), at fixed offsets past this part
 * (region.h has the map).
 *
 * Peers only ever touch this memory through the transport's one-sided
 * writes; every field written by a peer is a naturally aligned 64-bit word. */
#ifndef APUS_REGION_WIRE_H
#define APUS_REGION_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

#define REGION_MAGIC 0x314e475253555041ULL	/* "APUSRGN1" */
/* Bumped at every change of this header's layout or of the entry format
 * (entry.h): a node keeps the log and durable words of a previous process
 * only from a region of the same version.  The status page and the
 * mailboxes are not part of it. */
#define REGION_VERSION 8
#define REGION_CTL_SIZE 8192

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

/* The control page's wire part, at its start.  Only `magic` (published
 * last by region_create) tells a reader the rest is there. */
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
};

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

/* The node's doorbell; read it before checking for work (transport bell()). */
static inline uint32_t region_bell(struct region_ctl *c)
{
	return __atomic_load_n(&c->bell, __ATOMIC_SEQ_CST);
}

#endif
