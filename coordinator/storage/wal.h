/* The durable copy of a region held in memory: <data_dir>/apus.wal.
 *
 * A region in a disk file reaches the disk through the page cache's
 * writeback, and every writeback write-protects each page it cleans in
 * every process that maps it (a TLB shootdown across CPUs), so the next
 * write to the page faults.  The log is written once per page and lap, so
 * with 4 KB entries that was a fault and a shootdown per entry on each
 * replica, plus stalls of tens of ms behind the journal.  So the region
 * lives in a memory file system (region.h) and the log reaches the disk
 * as a copy: what a node persists (its own entries as leader, the ones it
 * acks as backup) and its durable words are written with pwrite() into
 * this file, at the same offsets as in the region, and fdatasync()ed —
 * per entry with fsync = always, by the sync thread every
 * fsync_interval_ms with fsync = batch.  After a reboot the region is
 * rebuilt from it (region_create).  With fsync = none there is no copy. */
#ifndef APUS_WAL_H
#define APUS_WAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "coordinator/storage/region_wire.h"

struct region_origin;

/* What a restart takes from the copy's control page (region_carry_over). */
struct wal_words {
	struct durable dur;
	struct log_hint hint;
};

struct wal {
	int fd;			/* -1: no copy (fsync = none, or the region is on disk) */
	int policy;		/* enum fsync_policy */
	const char *region;	/* the mapping the bytes are copied from */
	uint64_t log_size;
	pthread_mutex_t lock;	/* covers lo, hi, saved */
	uint64_t lo, hi;	/* fsync = batch: log positions persisted since the last pass */
	/* The words as the copy last took them: a pass with no log to write
	 * and no word changed writes and syncs nothing. */
	struct wal_words saved;
};

/* Opens NODE's copy for the region mapped at REGION as ORIGIN describes it,
 * and makes it match the region (the control page, and the log unless it
 * was just recovered from this copy).  A node without a copy removes a
 * stale one.  Returns 0 (W->fd = -1 when there is no copy) or -errno. */
int wal_open(struct wal *w, const struct apus_config *cfg, int node, const char *region,
	     const struct region_origin *origin);

/* Log bytes [POS, POS+LEN) (one entry, never across the end) are to be
 * durable: written now with fsync = always, remembered for the next pass
 * with fsync = batch. */
void wal_persist(struct wal *w, uint64_t pos, size_t len);

/* Writes the control page (the durable words) and syncs it now. */
void wal_save_ctl(struct wal *w);

/* fsync = batch: one pass, everything remembered since the last one (an
 * idle node's pass does nothing). */
void wal_pass(struct wal *w);

#endif
