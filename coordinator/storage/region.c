#define LOG_PREFIX "region: "
#include "coordinator/storage/region.h"

#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <linux/magic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "coordinator/storage/filemode.h"
#include "common/logger.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "common/sys.h"

/* The control page's map (region.h): its parts in order, each aligned,
 * none running into the next. */
_Static_assert(sizeof(struct region_ctl) <= REGION_STATUS_OFF,
	       "the wire part runs into the status page");
_Static_assert(REGION_STATUS_OFF + REGION_STATUS_SIZE <= REGION_OWNER_OFF,
	       "the status page runs into the owner");
_Static_assert(REGION_OWNER_OFF + REGION_OWNER_SIZE <= REGION_MAIL_OFF,
	       "the owner runs into the mailboxes");
_Static_assert(REGION_MAIL_OFF + sizeof(struct region_mail) <= REGION_CTL_SIZE,
	       "the mailboxes overflow the control page");
_Static_assert(REGION_STATUS_OFF % 8 == 0 && REGION_OWNER_OFF % 8 == 0 && REGION_MAIL_OFF % 8 == 0,
	       "a part is not aligned");

/* Copies the log and the durable words of the region file at PATH (if it
 * is a valid region of SIZE bytes for NODE) into the new mapping M.  Only
 * the file's data extents are copied: a mostly empty log stays sparse.
 * Returns 1 if it carried something over, 0 if there was nothing usable,
 * -EPERM if the file is not trustworthy (filemode.h; said in one line:
 * starting afresh instead would silently drop the node's log). */
static int region_carry_over(const char *path, int node, size_t size, char *m)
{
	struct region_ctl old;
	int fd = sys.open(path, O_RDONLY | O_CLOEXEC), ok = 0;
	struct stat st;
	off_t pos = REGION_CTL_SIZE;
	char why[PATH_MAX + 200];

	if (fd < 0)
		return 0;
	if (filemode_check(fd, path, "region file", FILEMODE_OTHERS_WRITE, why, sizeof(why))) {
		pr_err("node %d: %s", node, why);
		sys.close(fd);
		return -EPERM;
	}
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != size ||
	    pread(fd, &old, sizeof(old), 0) != (ssize_t)sizeof(old) || old.magic != REGION_MAGIC ||
	    old.version != REGION_VERSION || old.node != (uint32_t)node ||
	    old.region_size != size)
		goto out;
	while (pos < (off_t)size) {
		off_t data = lseek(fd, pos, SEEK_DATA), hole;

		if (data < 0)
			break;	/* ENXIO: no more data */
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || hole > (off_t)size)
			hole = (off_t)size;
		for (off_t at = data; at < hole;) {
			ssize_t k = pread(fd, m + at, (size_t)(hole - at), at);
			if (k <= 0)
				goto out;
			at += k;
		}
		pos = hole;
	}
	((struct region_ctl *)m)->dur = old.dur;
	((struct region_ctl *)m)->hint = old.hint;
	ok = 1;
out:
	sys.close(fd);
	return ok;
}

/* Whether DIR is a memory file system: its pages are never written back,
 * so a shared mapping of a file there costs no write-protect fault per
 * page and lap of the log (see wal.h). */
static int memory_dir(const char *dir)
{
	struct statfs fs;

	return statfs(dir, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) &&
	       access(dir, W_OK | X_OK) == 0;
}

void region_prefault(int fd, void *m, size_t size)
{
	struct statfs fs;

	if (fstatfs(fd, &fs) < 0 || (fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC))
		return;	/* on disk: writable pages would all be written back */
#ifdef MADV_POPULATE_WRITE
	if (madvise(m, size, MADV_POPULATE_WRITE) < 0 && errno != EINVAL)
		pr_perror("cannot fault in the region's pages ahead (%zu bytes)", size);
#else
	(void)m;
	(void)size;
#endif
}

/* The file in region_dir that holds NODE's region: one name per data
 * directory, so a node that restarts, or whose data directory was wiped,
 * reuses (replaces) its file rather than leaving one more behind. */
static int memory_path(const struct apus_config *cfg, int node, char *out, size_t len)
{
	char dir[PATH_MAX], name[64];
	uint64_t h = 0xcbf29ce484222325ULL;	/* FNV-1a of the data directory */
	size_t i;

	if (config_node_path(cfg, node, ".", dir, sizeof(dir)))
		return -1;
	for (const char *c = dir; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
	snprintf(name, sizeof(name), "%s", cfg->cluster);
	for (i = 0; name[i]; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '-' && name[i] != '_')
			name[i] = '_';
	return snprintf(out, len, "%s/apus-%s-n%d-%016llx.region", cfg->region_dir, name, node,
			(unsigned long long)h) >= (int)len ? -1 : 0;
}

/* Creates TMP of SIZE bytes; in memory, every page is allocated now, so a
 * full file system shows here and never as a SIGBUS in the server. */
static int create_file(const char *tmp, size_t size, int in_memory)
{
	int fd, err;

	/* Never through a name someone else made first: region_dir is
	 * usually /dev/shm, writable by every user. */
	if (unlink(tmp) < 0 && errno != ENOENT)
		return -errno;
	fd = sys.open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		err = -errno;
		goto fail;
	}
	if (in_memory && (err = -posix_fallocate(fd, 0, (off_t)size)))
		goto fail;
	return fd;
fail:
	sys.close(fd);
	unlink(tmp);
	return err;
}

/* Points the symlink PATH at TARGET (replacing whatever PATH is), in one
 * rename so that a reader never finds no PATH. */
static int link_into_place(const char *target, const char *path)
{
	char tmp[PATH_MAX + 32];

	snprintf(tmp, sizeof(tmp), "%s.%d.link", path, (int)getpid());
	unlink(tmp);
	if (symlink(target, tmp) < 0)
		return -errno;
	if (rename(tmp, path) < 0) {
		int err = -errno;
		unlink(tmp);
		return err;
	}
	return 0;
}

int region_create(const struct apus_config *cfg, int node, void **base, int *fdp,
		  struct region_origin *origin)
{
	char path[PATH_MAX], wal[PATH_MAX], target[PATH_MAX], tmp[PATH_MAX + 32];
	size_t size = region_size_for(cfg->log_size);
	struct region_ctl *ctl;
	struct timespec ts;
	void *m;
	int fd, err;

	memset(origin, 0, sizeof(*origin));
	if (config_node_path(cfg, node, REGION_FILE, path, sizeof(path)) ||
	    config_node_path(cfg, node, WAL_FILE, wal, sizeof(wal)))
		return -ENAMETOOLONG;
	origin->in_memory = strcmp(cfg->region_dir, "none") && memory_dir(cfg->region_dir) &&
			    memory_path(cfg, node, target, sizeof(target)) == 0;
	if (!origin->in_memory) {
		if (strcmp(cfg->region_dir, "none"))
			pr_warn("%s is not a writable memory file system: the region of node %d "
				"stays in its data_dir", cfg->region_dir, node);
		snprintf(target, sizeof(target), "%s", path);
	}
	/* Built under a temporary name and renamed into place: a peer that
	 * opens the path always finds a complete control page, and one that
	 * still maps the previous file sees a new inode (a restart). */
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", target, (int)getpid());
	fd = create_file(tmp, size, origin->in_memory);
	if (fd < 0 && origin->in_memory) {
		errno = -fd;
		pr_perror("cannot hold the region of node %d in %s; it stays in its data_dir",
			  node, cfg->region_dir);
		origin->in_memory = 0;
		snprintf(target, sizeof(target), "%s", path);
		snprintf(tmp, sizeof(tmp), "%s.%d.tmp", target, (int)getpid());
		fd = create_file(tmp, size, 0);
	}
	if (fd < 0) {
		errno = -fd;
		pr_perror("cannot create %s (%zu bytes)", tmp, size);
		return fd;
	}
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		pr_perror("cannot map %s", tmp);
		goto fail;
	}
	ctl = m;
	/* The previous process's region (through the symlink when it was in
	 * memory); after a reboot only its durable copy is left. */
	err = region_carry_over(path, node, size, m);
	if (!err)
		err = region_carry_over(wal, node, size, m) > 0 ? 2 : 0;
	if (err < 0) {
		munmap(m, size);
		goto fail;
	}
	region_prefault(fd, m, size);
	origin->recovered = err > 0;
	origin->from_wal = err == 2;
	if (origin->from_wal)
		pr_info("node %d: region recovered from its durable copy %s", node, wal);
	sys.clock_gettime(CLOCK_REALTIME, &ts);
	ctl->version = REGION_VERSION;
	ctl->node = (uint32_t)node;
	ctl->log_off = REGION_CTL_SIZE;
	ctl->log_size = cfg->log_size;
	ctl->region_size = size;
	ctl->incarnation = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	region_status(ctl)->pid = (uint64_t)getpid();
	region_status(ctl)->leader = -1;
	if (strlen(cfg->nodes[node].data_dir) < REGION_OWNER_SIZE)
		strcpy((char *)m + REGION_OWNER_OFF, cfg->nodes[node].data_dir);
	/* Pairs with the acquire load of magic by peers and the CLI. */
	store64(&ctl->magic, REGION_MAGIC);
	if (rename(tmp, target) < 0) {
		err = -errno;
		pr_perror("cannot rename %s to %s", tmp, target);
		munmap(m, size);
		goto fail;
	}
	if (origin->in_memory && (err = link_into_place(target, path))) {
		errno = -err;
		pr_perror("cannot link %s to %s", path, target);
		munmap(m, size);
		unlink(target);
		sys.close(fd);
		return err;
	}
	*base = m;
	*fdp = fd;
	if (origin->in_memory)
		region_collect(cfg->region_dir);
	return 0;
fail:
	sys.close(fd);
	unlink(tmp);
	return err;
}

/* Whether NAME is "<prefix>.region.<pid>.tmp" of a process that is gone. */
static int dead_tmp(const char *name)
{
	const char *r = strstr(name, ".region."), *end;
	char *stop;
	long pid;

	if (!r || strlen(name) < 4 || strcmp(end = name + strlen(name) - 4, ".tmp"))
		return 0;
	pid = strtol(r + 8, &stop, 10);
	return stop == end && pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* Whether the region file PATH is one no data directory links to any more
 * and no live process holds. */
static int orphan_region(const char *path)
{
	char link[PATH_MAX + 16], now[PATH_MAX], self[PATH_MAX];
	const size_t len = REGION_OWNER_OFF + REGION_OWNER_SIZE;	/* up to its owner */
	const struct region_ctl *ctl;
	int fd = sys.open(path, O_RDONLY | O_CLOEXEC), orphan = 0;
	char *page;

	if (fd < 0)
		return 0;
	page = malloc(len);
	ctl = (const struct region_ctl *)page;
	if (page && pread(fd, page, len, 0) == (ssize_t)len && ctl->magic == REGION_MAGIC &&
	    page[REGION_OWNER_OFF] && memchr(page + REGION_OWNER_OFF, 0, REGION_OWNER_SIZE)) {
		snprintf(link, sizeof(link), "%s/%s", page + REGION_OWNER_OFF, REGION_FILE);
		pid_t pid = (pid_t)region_status(ctl)->pid;
		int alive = pid > 0 && !(kill(pid, 0) < 0 && errno == ESRCH);
		orphan = !alive && realpath(path, self) && (!realpath(link, now) || strcmp(now, self));
	}
	free(page);
	sys.close(fd);
	return orphan;
}

int region_collect(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *d;
	DIR *dp = opendir(dir);
	int removed = 0;

	if (!dp)
		return 0;
	while ((d = readdir(dp))) {
		if (strncmp(d->d_name, "apus-", 5) || !strstr(d->d_name, ".region") ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, d->d_name) >= sizeof(path))
			continue;
		const char *why = dead_tmp(d->d_name)   ? "left by a process that died while creating it"
				  : orphan_region(path) ? "its data directory no longer links to it"
							: NULL;
		if (why && unlink(path) == 0) {
			pr_info("removed %s: %s", path, why);
			removed++;
		}
	}
	closedir(dp);
	return removed;
}

int region_backing_path(const struct apus_config *cfg, int node, char *out)
{
	char path[PATH_MAX];

	if (config_node_path(cfg, node, REGION_FILE, path, sizeof(path)))
		return -ENAMETOOLONG;
	return realpath(path, out) ? 0 : -errno;
}

static void *map_ctl(const struct apus_config *cfg, int node, int writable)
{
	char path[PATH_MAX];
	struct stat st;
	void *m;
	int fd;

	if (config_node_path(cfg, node, REGION_FILE, path, sizeof(path))) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	fd = sys.open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || st.st_size < REGION_CTL_SIZE) {
		sys.close(fd);
		errno = EINVAL;
		return NULL;
	}
	m = mmap(NULL, REGION_CTL_SIZE, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
		 fd, 0);
	sys.close(fd);
	if (m == MAP_FAILED)
		return NULL;
	if (load64(&((const struct region_ctl *)m)->magic) != REGION_MAGIC) {
		munmap(m, REGION_CTL_SIZE);
		errno = EINVAL;
		return NULL;
	}
	return m;
}

const struct region_ctl *region_map_ctl(const struct apus_config *cfg, int node)
{
	return map_ctl(cfg, node, 0);
}

struct region_ctl *region_map_ctl_rw(const struct apus_config *cfg, int node)
{
	return map_ctl(cfg, node, 1);
}

void region_unmap_ctl(const struct region_ctl *ctl)
{
	munmap((void *)ctl, REGION_CTL_SIZE);
}
