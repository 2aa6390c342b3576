/* divergence = repair (the default): a backup whose server's state left
 * the leader's is rebuilt by its guard from the leader's state.
 *
 * The output checker's reports are the trigger, not the proof: a reply
 * may differ while the state is equal (INFO, TIME, a random member).  So
 * the guard first runs apus verify (the config's verify_cmd, e.g. DEBUG
 * DIGEST, executed by every replica at one log position); only a node
 * that verify finds different is rebuilt.  Without verify_cmd nothing
 * tells the two apart: the divergence is only reported.
 *
 * The state it is rebuilt from is the leader's, the one clients were
 * answered from, not another backup's (which may have diverged the same
 * way): the leader's recovery point on this host (rebuild.h,
 * REBUILD_FROM_LEADER), asked for afresh (SNAPSHOT_REQUEST_FILE) so that
 * it is newer than the divergence.  Entries after it are replayed as
 * usual: a nondeterministic command among them may diverge the node
 * again, and it is repaired again, at most once per repair_interval_s.
 * Needs snapshot_cmd, verify_cmd, and the leader's node on this host. */
#ifndef APUS_GUARD_REPAIR_H
#define APUS_GUARD_REPAIR_H

#include <stdint.h>
#include <sys/types.h>

#include "common/config.h"

struct repair_state {
	pid_t pid;		/* the server whose divergences were counted */
	uint64_t seen;		/* its divergences already decided on */
	uint64_t next_ms;	/* no attempt before this (host_mono_ms) */
};

/* One look at live backup NODE (server PID, whose status counts
 * DIVERGENCES): 1 when it must be rebuilt from the leader now (its state
 * is confirmed different, and the leader on this host has a recovery
 * point newer than the check), with *LEADER set; else 0.  SAY gets one
 * line per decision. */
int repair_due(const struct apus_config *cfg, int node, pid_t pid, uint64_t divergences,
	       struct repair_state *st, int *leader, void (*say)(const char *fmt, ...));

#endif
