/* The guard, the per-node supervisor (guard.c); apus guard and apus-guard
 * (cli/guard_cmd.c) parse its options and run it. */
#ifndef APUS_GUARD_H
#define APUS_GUARD_H

#include "common/config.h"

/* Guards node NODE of CFG until SIGTERM or SIGINT; with SERVICE, starts
 * the node first (waiting up to TIMEOUT_MS for it to be ready, or adopts
 * the one running) and stops it at the end.  Returns the exit status: 0
 * stopped; 1 the node could not be started (SERVICE) or another error;
 * EXIT_OWNED (owner.h) the node already has a guard. */
int guard_run(const struct apus_config *cfg, int node, int timeout_ms, int service);

#endif
