/* A node's recovery point on disk; see recovery.h. */
#define LOG_PREFIX "recovery: "
#include "coordinator/storage/recovery.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/logger.h"
#include "common/sys.h"

static int node_file(const struct apus_config *cfg, int node, const char *name, char *out)
{
	return config_node_path(cfg, node, name, out, PATH_MAX) ? -ENAMETOOLONG : 0;
}

static int fsync_path(const char *path, int flags)
{
	int fd = sys.open(path, flags | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	sys.close(fd);
	return rc;
}

/* DST becomes a copy of SRC (another file system: no hard link). */
static int copy_file(const char *src, const char *dst)
{
	int in = sys.open(src, O_RDONLY | O_CLOEXEC), out, rc = 0;

	if (in < 0)
		return -errno;
	out = sys.open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = -errno;
		sys.close(in);
		return rc;
	}
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 24, 0);
		if (n == 0)
			break;
		if (n < 0) {
			rc = -errno;
			break;
		}
	}
	sys.close(in);
	sys.close(out);
	return rc;
}

static int write_seed(const char *path, const struct recovery_point *rp, uint64_t ino)
{
	FILE *f = sys.fopen(path, "we");

	if (!f)
		return -errno;
	fprintf(f, "index = %llu\nlog_pos = %llu\nview = %llu\nbytes = %llu\ninode = %llu\n"
		"rand_mark = %llu\n",
		(unsigned long long)rp->index, (unsigned long long)rp->log_pos,
		(unsigned long long)rp->view, (unsigned long long)rp->bytes,
		(unsigned long long)ino, (unsigned long long)rp->rand_mark);
	if (fflush(f) || fsync(fileno(f))) {
		int rc = -errno;
		fclose(f);
		return rc;
	}
	return fclose(f) ? -errno : 0;
}

int recovery_commit(const struct apus_config *cfg, int node, const char *src,
		    struct recovery_point *rp)
{
	char snap[PATH_MAX], seed[PATH_MAX], snap_tmp[PATH_MAX + 8], seed_tmp[PATH_MAX + 8];
	struct stat st;
	int rc;

	if ((rc = node_file(cfg, node, SNAPSHOT_FILE, snap)) ||
	    (rc = node_file(cfg, node, SEED_FILE, seed)))
		return rc;
	snprintf(snap_tmp, sizeof(snap_tmp), "%s.tmp", snap);
	snprintf(seed_tmp, sizeof(seed_tmp), "%s.tmp", seed);
	unlink(snap_tmp);
	/* A link, not a copy: the server replaces its snapshot file by rename
	 * when it writes the next one (Redis does), so this inode stays ours. */
	if (link(src, snap_tmp) < 0) {
		if (errno != EXDEV && errno != EPERM)
			return -errno;
		if ((rc = copy_file(src, snap_tmp)))
			return rc;
	}
	if ((rc = fsync_path(snap_tmp, O_RDONLY)) || stat(snap_tmp, &st) < 0) {
		rc = rc ? rc : -errno;
		unlink(snap_tmp);
		return rc;
	}
	rp->bytes = (uint64_t)st.st_size;
	if ((rc = write_seed(seed_tmp, rp, (uint64_t)st.st_ino))) {
		unlink(snap_tmp);
		return rc;
	}
	/* Snapshot first: a crash before the seed's rename leaves the old
	 * seed naming an inode that is gone, and seed.tmp naming this one. */
	if (rename(snap_tmp, snap) < 0 || rename(seed_tmp, seed) < 0)
		return -errno;
	return fsync_path(cfg->nodes[node].data_dir, O_RDONLY | O_DIRECTORY);
}

/* Parses a seed file; 0, or -EINVAL when a word is missing. */
static int read_seed(const char *path, struct recovery_point *rp, uint64_t *ino)
{
	char key[32];
	unsigned long long v;
	int seen = 0;
	FILE *f = sys.fopen(path, "re");

	if (!f)
		return -errno;
	rp->rand_mark = UINT64_MAX;	/* optional: older seeds lack it */
	while (fscanf(f, " %31s = %llu", key, &v) == 2) {
		if (!strcmp(key, "index"))
			rp->index = v, seen |= 1;
		else if (!strcmp(key, "log_pos"))
			rp->log_pos = v, seen |= 2;
		else if (!strcmp(key, "view"))
			rp->view = v, seen |= 4;
		else if (!strcmp(key, "bytes"))
			rp->bytes = v, seen |= 8;
		else if (!strcmp(key, "inode"))
			*ino = v, seen |= 16;
		else if (!strcmp(key, "rand_mark"))
			rp->rand_mark = v;
	}
	fclose(f);
	return seen == 31 ? 0 : -EINVAL;
}

/* recovery_load, or recovery_peek when not COMPLETE. */
static int load(const struct apus_config *cfg, int node, struct recovery_point *rp, int complete)
{
	char snap[PATH_MAX], seed[PATH_MAX], seed_tmp[PATH_MAX + 8];
	struct stat st;
	uint64_t ino = 0;
	int rc;

	memset(rp, 0, sizeof(*rp));
	if ((rc = node_file(cfg, node, SNAPSHOT_FILE, snap)) ||
	    (rc = node_file(cfg, node, SEED_FILE, seed)))
		return rc;
	snprintf(seed_tmp, sizeof(seed_tmp), "%s.tmp", seed);
	if (stat(snap, &st) < 0) {
		if (access(seed, F_OK) == 0) {
			pr_err("%s exists without %s: ignored", seed, snap);
			return -EINVAL;
		}
		return -ENOENT;
	}
	rc = read_seed(seed, rp, &ino);
	if (!rc && ino == (uint64_t)st.st_ino && rp->bytes == (uint64_t)st.st_size)
		return 0;
	/* A commit that stopped between its two renames (or, to a reader
	 * that is not the node, one under way: the node completes it). */
	memset(rp, 0, sizeof(*rp));
	if (!read_seed(seed_tmp, rp, &ino) && ino == (uint64_t)st.st_ino &&
	    rp->bytes == (uint64_t)st.st_size) {
		if (!complete)
			return 0;
		if (rename(seed_tmp, seed) == 0) {
			pr_info("completed the recovery point at entry %llu that a crash interrupted",
				(unsigned long long)rp->index);
			return 0;
		}
	}
	memset(rp, 0, sizeof(*rp));
	if (complete)
		pr_err("%s does not match %s (size or inode differ): no recovery point", seed, snap);
	return -EINVAL;
}

int recovery_load(const struct apus_config *cfg, int node, struct recovery_point *rp)
{
	return load(cfg, node, rp, 1);
}

int recovery_peek(const struct apus_config *cfg, int node, struct recovery_point *rp)
{
	return load(cfg, node, rp, 0);
}

int recovery_install(const struct apus_config *cfg, int node, int valid)
{
	char snap[PATH_MAX], file[PATH_MAX], aside[PATH_MAX + 16];
	int rc;

	if (!cfg->snapshot_file[0])
		return 0;
	if ((rc = node_file(cfg, node, SNAPSHOT_FILE, snap)) ||
	    (rc = node_file(cfg, node, cfg->snapshot_file, file)))
		return rc;
	if (valid) {
		snprintf(aside, sizeof(aside), "%s.apus-tmp", file);
		unlink(aside);
		if (link(snap, aside) < 0 && (errno != EXDEV || (rc = copy_file(snap, aside))))
			return rc ? rc : -errno;
		return rename(aside, file) < 0 ? -errno : 0;
	}
	if (access(file, F_OK) < 0)
		return 0;
	snprintf(aside, sizeof(aside), "%s.unseeded", file);
	pr_warn("%s belongs to no recovery point: moved to %s, the server starts empty", file,
		aside);
	return rename(file, aside) < 0 ? -errno : 0;
}
