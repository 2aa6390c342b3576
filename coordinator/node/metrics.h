/* The node's Prometheus endpoint: a small thread of the node answers
 * `GET /metrics` on its address:metrics_port with the text format
 * (version 0.0.4), read from the counters of its region's status block
 * (struct node_status) and the guard's checkpoint words.  No endpoint
 * without a metrics_port; a port that cannot be bound is logged and the
 * node runs on without one.  Read-only and unauthenticated: bind it to an
 * address only the monitoring can reach.  The metric names are listed in
 * doc/operator-guide.md ("Metrics"). */
#ifndef APUS_METRICS_H
#define APUS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

struct node;
struct node_status;
struct region_ctl;

/* Starts node N's endpoint when its metrics_port is set.  Never fails the
 * node: a socket or thread that cannot be had is logged, and that is all. */
void metrics_start(struct node *n);
/* In a child the server forked: closes the listening socket (its port is
 * the node's, for a restarted one). */
void metrics_forget_in_child(void);

/* Leader: a proposal (or, with commit_wait = reply, a held reply) waited
 * NS nanoseconds for its commit.  Three relaxed atomic adds. */
void metrics_commit_latency(struct node_status *s, uint64_t ns);

/* Writes node SELF's metrics, read from CTL, as Prometheus text into BUF
 * (CAP bytes, NUL-terminated).  Returns the length, or 0 if CAP is too
 * small for all of it. */
size_t metrics_render(const struct apus_config *cfg, int self, const struct region_ctl *ctl,
		      char *buf, size_t cap);

#endif
