/* A node's recovery points as an operator sees them (apus status): the
 * newest of its snapshot (coordinator/storage/recovery.h) and its newest CRIU
 * checkpoint (checkpoint.h), whatever made it, and the last failure to
 * make one since.  Read from the node's files and its control page, so it
 * works for a node that is down too. */
#ifndef APUS_GUARD_RECOVERY_VIEW_H
#define APUS_GUARD_RECOVERY_VIEW_H

#include <stdint.h>

#include "common/config.h"

struct region_ctl;

struct recovery_view {
	const char *kind;	/* "snapshot", "checkpoint", or NULL: none */
	uint64_t index;		/* the entry it holds the state at */
	uint64_t made_ms;	/* when it was made (CLOCK_REALTIME) */
	char error[300];	/* the last failure to make one since (empty: none) */
	uint64_t error_ms;
};

/* Fills *OUT for NODE; CTL is its control page, or NULL when it has none
 * (then no failure is known). */
void recovery_view_read(const struct apus_config *cfg, int node, const struct region_ctl *ctl,
			struct recovery_view *out);

/* Whether NODE's newest recovery point is older than the config's
 * recovery_point_max_age_s while its server executed past it (APPLIED),
 * or it has none and making one failed. */
int recovery_view_stale(const struct apus_config *cfg, const struct recovery_view *v,
			uint64_t applied);

#endif
