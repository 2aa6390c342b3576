/* Rebuilding a replica from a live peer (design §7, "a replaced replica
 * joins"): for a node whose data directory is gone, or that fell so far
 * behind that the leader's bounded log no longer holds what it needs.
 *
 * A CRIU image belongs to the node it was taken of (its listening
 * address, its files, its region), so a peer's state comes through the
 * server's own snapshot instead: a live backup M is held at entry i (the
 * checkpoint handshake; its server has consumed everything up to i), the
 * config's snapshot_cmd makes M's server write <data_dir>/<snapshot_file>,
 * that file is copied to node N beside an apus.seed naming (i, log
 * position, view), and N is started: its server loads the snapshot, its
 * shim executes from entry i+1 on and joins the leader from there.  M
 * stays held (its applied position pins the leader's log) until N has
 * joined, so the entries N needs cannot be overwritten meanwhile.
 *
 * When the peer's node sets guard_port, the snapshot comes from the
 * peer's guard over the network (snapshot_net.h): the peer may live on
 * another host.  Without it, from the peer's data directory on this host.
 *
 * The snapshot file and apus.seed are a pair: M gets a seed for the
 * snapshot left in its own data directory too, and checkpoint copies
 * leave both alone, so any later fresh start of either node loads a
 * snapshot and executes from the entry after it. */
#ifndef APUS_GUARD_REBUILD_H
#define APUS_GUARD_REBUILD_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/config.h"

struct region_ctl;

/* The source side: backup NODE held at its next entry with its server's
 * snapshot written (and made NODE's own recovery point).  Kept held
 * until snapshot_release. */
struct held_snapshot {
	struct region_ctl *ctl;
	uint64_t req, held_at_ms;
	uint64_t index, log_pos, view, bytes;
	uint64_t rand_mark;	/* its server's generator's mark (UINT64_MAX: unknown) */
	char path[PATH_MAX];	/* the snapshot file in NODE's data_dir */
};

/* Whether NODE is a live backup synced to its leader (not left behind);
 * its applied index in *APPLIED.  Reads NODE's region: this host only. */
int rebuild_source_ok(const struct apus_config *cfg, int node, uint64_t *applied);

/* Holds NODE and has its server write its snapshot; LOG gets the
 * command's output.  0, or -1 with ERR set (nothing held then). */
int snapshot_hold(const struct apus_config *cfg, int node, const char *log,
		  struct held_snapshot *h, char *err, size_t errlen);
/* Lets NODE execute again; returns how long it was held (ms). */
uint64_t snapshot_release(struct held_snapshot *h);

struct rebuild_info {
	int from;		/* the peer whose server's snapshot was used */
	uint64_t index, view, log_pos;
	uint64_t rand_mark;	/* the snapshot's generator mark (input_random.h) */
	uint64_t snapshot_bytes;
	uint64_t hold_ms;	/* how long the peer was held */
	uint64_t total_ms;
	pid_t pid;		/* node's new server */
};

/* FROM for node_rebuild: the leader's recovery point (its stored snapshot,
 * on this host), whatever the backups hold: the state clients were
 * answered from (guard/repair.c). */
#define REBUILD_FROM_LEADER (-2)

/* Rebuilds NODE (not running) from peer FROM (-1: the most caught-up live
 * backup; REBUILD_FROM_LEADER), starting its server under LIB.  PROGRESS, if set, gets one line
 * per step.  Returns 0 once NODE joined its leader, or -1 with ERR set. */
int node_rebuild(const struct apus_config *cfg, int node, int from, const char *lib,
		 struct rebuild_info *out, void (*progress)(const char *step), char *err,
		 size_t errlen);

#endif
