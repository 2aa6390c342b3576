#define LOG_PREFIX "region: "
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"

/* Copies the log and the durable words of the region file at PATH (if it
 * is a valid region of SIZE bytes for NODE) into the new mapping M.  Only
 * the file's data extents are copied: a mostly empty log stays sparse.
 * Returns 1 if it carried something over, 0 if there was nothing usable. */
static int region_carry_over(const char *path, int node, size_t size, char *m)
{
	struct region_ctl old;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ok = 0;
	struct stat st;
	off_t pos = REGION_CTL_SIZE;

	if (fd < 0)
		return 0;
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
	ok = 1;
out:
	close(fd);
	return ok;
}

int region_create(const struct apus_config *cfg, int node, void **base, int *fdp, int *recovered)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	size_t size = region_size_for(cfg->log_size);
	struct region_ctl *ctl;
	struct timespec ts;
	void *m;
	int fd, err;

	if (config_node_path(cfg, node, REGION_FILE, path, sizeof(path)))
		return -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	/* Built under a temporary name and renamed into place: a peer that
	 * opens the path always finds a complete control page, and one that
	 * still maps the previous file sees a new inode (a restart). */
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		pr_perror("cannot create %s", tmp);
		return err;
	}
	if (ftruncate(fd, (off_t)size) < 0) {
		err = -errno;
		pr_perror("cannot size %s to %zu bytes", tmp, size);
		goto fail;
	}
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		pr_perror("cannot map %s", tmp);
		goto fail;
	}
	ctl = m;
	*recovered = region_carry_over(path, node, size, m);
	clock_gettime(CLOCK_REALTIME, &ts);
	ctl->version = REGION_VERSION;
	ctl->node = (uint32_t)node;
	ctl->log_off = REGION_CTL_SIZE;
	ctl->log_size = cfg->log_size;
	ctl->region_size = size;
	ctl->incarnation = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	ctl->status.pid = (uint64_t)getpid();
	ctl->status.leader = -1;
	/* Pairs with the acquire load of magic by peers and the CLI. */
	store64(&ctl->magic, REGION_MAGIC);
	if (rename(tmp, path) < 0) {
		err = -errno;
		pr_perror("cannot rename %s to %s", tmp, path);
		munmap(m, size);
		goto fail;
	}
	*base = m;
	*fdp = fd;
	return 0;
fail:
	close(fd);
	unlink(tmp);
	return err;
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
	fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || st.st_size < REGION_CTL_SIZE) {
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	m = mmap(NULL, REGION_CTL_SIZE, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
		 fd, 0);
	close(fd);
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
