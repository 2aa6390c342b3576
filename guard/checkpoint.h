/* Checkpoints of a backup's server (design §7): CRIU images of the process
 * plus a copy of its data directory, taken at a known log entry, kept
 * under <data_dir>/checkpoints/<id>/:
 *
 *   images/   the CRIU dump (dump.log, restore.log beside the images)
 *   data/     the server's files from data_dir (apus.* and sockets excepted)
 *   SHA256SUMS  every file of images/ and data/; a damaged one is refused
 *   meta      key = value: index, view, log_pos, time_ms, pid, sizes, times
 *
 * A checkpoint is built in .tmp-<id> and renamed into place once whole, so
 * an interrupted one never looks complete.  The id sorts by entry index. */
#ifndef APUS_GUARD_CHECKPOINT_H
#define APUS_GUARD_CHECKPOINT_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/config.h"

#define CKPT_MAX 64
#define CKPT_DIR "checkpoints"	/* in data_dir */

struct ckpt_info {
	char id[64];
	char dir[PATH_MAX];
	uint64_t index, view, log_pos, time_ms;
	uint64_t image_bytes, data_bytes;
	uint64_t dump_ms;
	pid_t pid;
	int drained;	/* its server had taken every entry sent to it (not kept on disk) */
};

/* The CRIU binary: $APUS_CRIU, else criu from PATH. */
const char *criu_binary(void);

/* 0 if CRIU is installed and `criu check` passes; else -1 with WHY set to
 * one line ("criu not found", "criu check failed: ..."). */
int criu_usable(char *why, size_t len);

/* Runs ARGV (in network namespace NETNS when set) with stdout and stderr
 * to LOG (or /dev/null); returns its exit status, 127 if it could not run.
 * PRIO: RUN_NOW, or RUN_BACKGROUND (nice 19: a checkpoint's dump, copies
 * and checksums take the CPU the replicas leave, not theirs). */
enum { RUN_NOW = 0, RUN_BACKGROUND = 1 };
int ckpt_run(char *const argv[], const char *netns, const char *log, int prio);

/* ckpt_run, stopping ARGV (SIGKILL) once process TARGET has been dead for
 * 2 s: then RUN_TARGET_DIED. */
#define RUN_TARGET_DIED 1000
int ckpt_run_watching(char *const argv[], const char *netns, const char *log, int prio,
		      pid_t target);

/* One progress line, formatted, to PROGRESS (nothing when NULL). */
void ckpt_say(void (*progress)(const char *), const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Asks NODE (whose control page is CTL) to hold execution; returns the
 * request number with CTL's checkpoint words idx, pos, view and drained
 * valid, or 0 with ERR set.  Store it into ckpt.release to let it go. */
struct region_ctl;
uint64_t ckpt_hold(struct region_ctl *ctl, int node, char *err, size_t errlen);

/* Takes a checkpoint of backup NODE (running as PID): hold, dump (left
 * running), copy data, release.  PROGRESS, if set, gets one line per step.
 * Returns 0 with *OUT filled, or -1 with ERR set. */
int ckpt_take(const struct apus_config *cfg, int node, struct ckpt_info *out,
	      void (*progress)(const char *step), char *err, size_t errlen);

/* The store (ckpt_store.c).  NODE's checkpoint directory into OUT; 0, or
 * -1 if it does not fit. */
int ckpt_root(const struct apus_config *cfg, int node, char *out, size_t len);
/* OUT = A/B; 0, or -1 if it does not fit. */
int ckpt_join_path(char *out, size_t len, const char *a, const char *b);
/* Writes SUMS for DIR's images/ and data/ (at nice 19); their sizes in
 * *IMAGES and *DATA.  0 or -1. */
int ckpt_write_sums(const char *dir, const char *sums, uint64_t *images, uint64_t *data);
/* Removes PATH and all below it; 0 or -1. */
int ckpt_remove_tree(const char *path);

/* NODE's complete checkpoints, newest (highest index) first; returns how
 * many (at most MAX), or -1 with errno set. */
int ckpt_list(const struct apus_config *cfg, int node, struct ckpt_info *out, int max);

/* Writes C's numbers into DIR/meta: 0, or -1. */
int ckpt_meta_write(const struct ckpt_info *c, const char *dir);
/* Reads <C->dir>/meta into C's numbers (fields it lacks are left alone).
 * 0, or -1 if it is unreadable, holds no "key = number" line or no pid. */
int ckpt_meta_read(struct ckpt_info *c);

/* One line of SHA256SUMS, "<64 hex digits>  <path>" (its newline is cut):
 * 0 with *NAME the path in LINE, or -1 if it is malformed or the path
 * leaves the checkpoint (absolute, or a ".." component). */
int ckpt_sums_line(char *line, const char **name);

/* Checks a checkpoint's files against its SHA256SUMS.  0, or -1 with WHY
 * naming the first file that is missing or differs. */
int ckpt_verify(const struct ckpt_info *c, char *why, size_t len);

/* Removes all but the newest KEEP checkpoints of NODE; returns how many went. */
int ckpt_prune(const struct apus_config *cfg, int node, int keep);

/* Restores NODE (not running) from checkpoint ID, or from the newest that
 * verifies when ID is NULL (each damaged one is reported through WARN and
 * skipped) and only if it is newer than the node's snapshot (recovery.h):
 * else ERR says a start loads the snapshot.  Returns 0 with *USED filled
 * once the restored process runs, or -1 with ERR set. */
int ckpt_restore(const struct apus_config *cfg, int node, const char *id, struct ckpt_info *used,
		 void (*warn)(const char *msg), char *err, size_t errlen);

#endif
