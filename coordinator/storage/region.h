/* The registered region every replica exposes to its peers: a control page
 * followed by the circular log.  It is a MAP_SHARED mapping of a file in
 * region_dir (a memory file system, /dev/shm by default) that
 * <data_dir>/apus.region links to, so peers on this host and `apus status`
 * find it by the data directory; its durable copy is <data_dir>/apus.wal
 * (wal.h).  With region_dir = none, or no memory file system, apus.region
 * is the file itself and the log reaches the disk by msync.
 *
 * The control page holds three things, each in its own header, so that a
 * change to one recompiles only the files that use it:
 *
 *   offset             part                          header           writers
 *   0                  struct region_ctl: the wire   region_wire.h    the node; each
 *                      ABI (header, durable words,                    peer its slots
 *                      log hint, peer slots, bell)
 *   REGION_STATUS_OFF  struct node_status, and room  region_status.h  the node
 *                      to grow to REGION_STATUS_SIZE
 *   REGION_OWNER_OFF   the data directory that       (here)           region_create
 *                      links to the file
 *   REGION_MAIL_OFF    struct region_mail            region_mail.h    the guard and the
 *                                                                     CLI ask, the node
 *                                                                     answers
 *
 * region.c checks that they do not overlap.  This header is the region's
 * file and its mappings; it includes none of the parts. */
#ifndef APUS_REGION_H
#define APUS_REGION_H

#include <stddef.h>

struct apus_config;
struct region_ctl;

#define REGION_FILE "apus.region"
#define WAL_FILE "apus.wal"

/* The data directory whose apus.region link names the file (empty when
 * too long): a file in region_dir that no link names any more (its data
 * directory was deleted) is garbage (region_collect).  Read by every
 * build's region_collect: it keeps its place. */
#define REGION_OWNER_OFF 4296
#define REGION_OWNER_SIZE 512

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

/* Faults in every page of the mapping M (SIZE bytes) of the region file
 * FD now, writable, where the file is in memory: the log's first lap would
 * otherwise take a page fault (and a page clear) every 4 KiB on the
 * leader's hot path, in its own region and in each peer's it writes to.
 * Best effort: kernels before 5.14 fault them in as they come. */
void region_prefault(int fd, void *m, size_t size);

/* The file behind NODE's <data_dir>/apus.region (symlink resolved) into
 * OUT (PATH_MAX bytes).  Returns 0 or -errno. */
int region_backing_path(const struct apus_config *cfg, int node, char *out);

/* Maps NODE's region file read-only (just the control page) for inspection.
 * Returns the mapping or NULL with errno set.  Unmap with region_unmap_ctl. */
const struct region_ctl *region_map_ctl(const struct apus_config *cfg, int node);
void region_unmap_ctl(const struct region_ctl *ctl);
/* The same, writable: for the mailboxes (region_mail.h). */
struct region_ctl *region_map_ctl_rw(const struct apus_config *cfg, int node);

/* Removes from DIR (a region_dir) what no node can use any more: the
 * temporary files of region_create whose process is gone, and regions
 * whose owner's data directory no longer links to them, unless their
 * process lives.  Logs each one; returns how many it removed. */
int region_collect(const char *dir);

#endif
