/* A node's recovery point on disk: a snapshot of its server's state and
 * the log entry that state ends at.  The snapshot plus the log after it is
 * the node's whole state, whatever the history's length (design §5: the
 * log's base is what durable snapshots cover).
 *
 *   <data_dir>/apus.snapshot   the server's snapshot file (a hard link to,
 *                              or copy of, what snapshot_cmd wrote)
 *   <data_dir>/apus.seed       index, log_pos, view of the entry it ends at,
 *                              the snapshot's size and inode, and the
 *                              server generator's state there (rand_mark)
 *
 * The two are a pair: the seed names the snapshot's inode and size, both
 * are written aside and renamed into place (snapshot first), so a crash
 * between the renames leaves a seed that does not match, and the seed
 * written aside (apus.seed.tmp) is the one that does.  A server loads its
 * snapshot_file at start: recovery_install puts apus.snapshot there, or
 * moves a stray snapshot_file aside so the server starts empty. */
#ifndef APUS_RECOVERY_H
#define APUS_RECOVERY_H

#include <stdint.h>

#include "common/config.h"

#define SNAPSHOT_FILE "apus.snapshot"
#define SEED_FILE "apus.seed"
/* In app_reset_cmd's environment when the node starts from a recovery
 * point: the path of its snapshot_file, in place.  A server that keeps
 * its state on disk and loads nothing else at start (slapd's database)
 * is given the point there (apps/openldap/reset.sh: slapadd). */
#define RECOVERY_POINT_ENV "APUS_RECOVERY_POINT"

/* A file in a node's data directory asking it for a recovery point now
 * (a guard about to rebuild a diverged peer from this node's state wants
 * one newer than the divergence: guard/repair.c).  The node removes it
 * when it sees it. */
#define SNAPSHOT_REQUEST_FILE "apus.snapshot.request"

struct recovery_point {
	uint64_t index;		/* the last entry the snapshot holds (0: none) */
	uint64_t log_pos;	/* the log position just past it */
	uint64_t view;		/* that entry's view */
	uint64_t bytes;		/* the snapshot's size */
	/* input_random_mark() at that entry; UINT64_MAX: dirty or unknown
	 * (a seed file written before it was kept). */
	uint64_t rand_mark;
};

/* Makes SRC (a file NODE's server wrote) NODE's recovery point RP.  SRC
 * is hard-linked (copied across file systems), never moved.  Returns 0 or
 * -errno. */
int recovery_commit(const struct apus_config *cfg, int node, const char *src,
		    struct recovery_point *rp);

/* Reads NODE's recovery point.  0 with *RP set; -ENOENT when there is
 * none; -EINVAL when the seed and the snapshot do not match (or the seed
 * is unreadable). */
int recovery_load(const struct apus_config *cfg, int node, struct recovery_point *rp);
/* The same, read only, for a process other than the node's (the CLI, the
 * guard): a commit found between its renames is taken as done but left
 * for the node to complete (completing it here raced the node's own
 * rename, which then failed its snapshot), and a mismatch is not logged. */
int recovery_peek(const struct apus_config *cfg, int node, struct recovery_point *rp);

/* Before NODE's server starts: puts its recovery point's snapshot in
 * snapshot_file when VALID, else moves any snapshot_file aside
 * (<snapshot_file>.unseeded), so the server never loads state the log
 * would execute again.  0 or -errno. */
int recovery_install(const struct apus_config *cfg, int node, int valid);

#endif
