#include "coordinator/storage/filemode.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "coordinator/storage/region.h"

static int check_stat(const struct stat *st, const char *path, const char *what,
		      mode_t forbidden, char *err, size_t errlen)
{
	if (st->st_uid != geteuid()) {
		snprintf(err, errlen, "%s %s is owned by uid %u, not by this user (uid %u): "
			 "refusing it (chown it, or remove it if you did not make it)",
			 what, path, (unsigned)st->st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st->st_mode & forbidden) {
		snprintf(err, errlen, "%s %s has mode %04o, which lets others %s it: "
			 "refusing it (chmod %s %s)", what, path, (unsigned)(st->st_mode & 07777),
			 forbidden & 044 ? "read or write" : "write",
			 S_ISDIR(st->st_mode) ? "700" : "600", path);
		return -EPERM;
	}
	return 0;
}

int filemode_check(int fd, const char *path, const char *what, mode_t forbidden, char *err,
		   size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		int rc = -errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return rc;
	}
	return check_stat(&st, path, what, forbidden, err, errlen);
}

int filemode_check_path(const char *path, const char *what, mode_t forbidden, char *err,
			size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		int rc = -errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return rc;
	}
	return check_stat(&st, path, what, forbidden, err, errlen);
}

int filemode_check_node(const struct apus_config *cfg, int node, char *err, size_t errlen)
{
	static const char *const names[] = { REGION_FILE, WAL_FILE };
	const char *key = cfg->nodes[node].secret_file;
	char path[PATH_MAX];
	int rc;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (config_node_path(cfg, node, names[i], path, sizeof(path)) ||
		    access(path, F_OK) < 0)
			continue;	/* none yet: apus makes it, 0600 */
		rc = filemode_check_path(path, i ? "durable log copy" : "region file",
					 FILEMODE_OTHERS_WRITE, err, errlen);
		if (rc)
			return rc;
	}
	if (key[0] && (strcmp(cfg->transport, "shm") || cfg->nodes[node].guard_port) &&
	    access(key, F_OK) == 0)
		return filemode_check_path(key, "cluster key", 077, err, errlen);
	return 0;
}
