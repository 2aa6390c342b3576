/* One owner per node: the lock, and finding a node's processes (owner.h). */
#include "owner.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coordinator/node/child_env.h"
#include "host.h"

static void read_holder(int fd, char *out, size_t len)
{
	char buf[160];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	int pid = 0, used = 0;

	if (n <= 0) {
		snprintf(out, len, "another command");
		return;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (sscanf(buf, "%d %n", &pid, &used) >= 1 && used > 0)
		snprintf(out, len, "%s (pid %d)", buf + used, pid);
	else
		snprintf(out, len, "another command");
}

int owner_acting(const struct apus_config *cfg, int node, char *out, size_t len)
{
	char path[PATH_MAX], buf[160];
	int fd, pid = 0, used = 0;
	ssize_t n;

	if (config_run_path(cfg, node, OWNER_LOCK_FILE, path, sizeof(path)) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;	/* emptied by its last holder: nobody acts */
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (sscanf(buf, "%d %n", &pid, &used) < 1 || !used || !host_pid_alive(pid))
		return 0;
	snprintf(out, len, "%s (pid %d)", buf + used, pid);
	return 1;
}

int owner_lock(const struct apus_config *cfg, int node, const char *file, const char *what,
	       int wait_ms, int *waited, char *holder, size_t len)
{
	char path[PATH_MAX], line[160];
	int fd;

	if (waited)
		*waited = 0;
	if (config_run_path(cfg, node, file, path, sizeof(path)) ||
	    host_mkdirs(cfg->nodes[node].run_dir)) {
		snprintf(holder, len, "cannot create run_dir %s of node %d: %s",
			 cfg->nodes[node].run_dir, node, strerror(errno));
		return -2;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(holder, len, "cannot open %s: %s", path, strerror(errno));
		return -2;
	}
	for (int slept = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; slept += 20) {
		if (errno != EWOULDBLOCK) {
			snprintf(holder, len, "cannot lock %s: %s", path, strerror(errno));
			close(fd);
			return -2;
		}
		if (waited)
			*waited = 1;
		if (slept >= wait_ms) {
			read_holder(fd, holder, len);
			close(fd);
			return -1;
		}
		host_sleep_ms(20);
	}
	/* Ours now: name ourselves for whoever finds it taken. */
	int n = snprintf(line, sizeof(line), "%d %s\n", (int)getpid(), what);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)n, 0) != n) {
		/* Only the holder's name is lost: the lock holds regardless. */
	}
	return fd;
}

void owner_unlock(int fd)
{
	if (fd < 0)
		return;
	/* Emptied first: a reader that finds it taken later reads no stale name. */
	if (ftruncate(fd, 0) < 0) {
		/* the next holder rewrites it */
	}
	close(fd);
}

/* The server's own lock (preload/shim.c): <data_dir>/apus.lock, flocked by
 * the server for its life, inherited by what it forks, and restored with
 * it by CRIU (--file-locks).  Its identity, or -1 when there is none yet. */
static int server_lock_id(const struct apus_config *cfg, int node, struct stat *st)
{
	char path[PATH_MAX];

	return config_node_path(cfg, node, "apus.lock", path, sizeof(path)) || stat(path, st) < 0
		       ? -1
		       : 0;
}

/* Whether PID has the file ID open. */
static int has_open(pid_t pid, const struct stat *id)
{
	char dir[64], fd[64 + 256];
	struct dirent *d;
	struct stat st;
	DIR *dp;
	int found = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(dp = opendir(dir)))
		return 0;
	while (!found && (d = readdir(dp))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(fd, sizeof(fd), "%s/%s", dir, d->d_name);
		found = stat(fd, &st) == 0 && st.st_ino == id->st_ino && st.st_dev == id->st_dev;
	}
	closedir(dp);
	return found;
}

/* The process holding NODE's server lock, or 0.  /proc/locks names the
 * process that took it (the server; a CRIU-restored server takes it again
 * under its own pid); that it still has the file open confirms it. */
static pid_t server_lock_holder(const struct apus_config *cfg, int node)
{
	char line[256], type[16];
	struct stat id;
	unsigned long ino;
	unsigned maj, min;
	int pid, holder = 0;
	FILE *f;

	if (server_lock_id(cfg, node, &id) || !(f = fopen("/proc/locks", "re")))
		return 0;
	while (!holder && fgets(line, sizeof(line), f)) {
		if (strstr(line, "->"))		/* a waiter, not a holder */
			continue;
		if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%lu", type, &pid, &maj, &min, &ino) == 5 &&
		    !strcmp(type, "FLOCK") && ino == (unsigned long)id.st_ino && pid > 0 &&
		    has_open((pid_t)pid, &id))
			holder = pid;
	}
	fclose(f);
	return (pid_t)holder;
}

int node_owns_pid(const struct apus_config *cfg, int node, pid_t pid)
{
	pid_t holder;

	if (pid <= 0 || !host_pid_alive(pid))
		return 0;
	/* No holder: the server has not taken it yet (it is starting). */
	holder = server_lock_holder(cfg, node);
	return !holder || holder == pid;
}

/* Whether the NUL-separated environment ENV (N bytes) holds the line WANT. */
static int env_has(const char *env, size_t n, const char *want)
{
	size_t wl = strlen(want);

	for (size_t i = 0; i < n;) {
		size_t l = strnlen(env + i, n - i);
		if (l == wl && !memcmp(env + i, want, wl))
			return 1;
		i += l + 1;
	}
	return 0;
}

/* Whether PID's environment names the node: what host_spawn_node ran, and
 * its children, unless the server wrote over its environment (Redis does,
 * for its process title: the server lock finds those); and the recovery
 * point commands the node ran (CHILD_ENV_NODE), which live in sessions of
 * their own and would outlive a killed server. */
static int env_names_node(pid_t pid, const char *want_config, const char *want_node,
			  const char *want_cmd)
{
	static char env[64 << 10];
	char path[64];
	size_t n = 0;
	ssize_t k;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (n < sizeof(env) && (k = read(fd, env + n, sizeof(env) - n)) > 0)
		n += (size_t)k;
	close(fd);
	return env_has(env, n, want_config) &&
	       (env_has(env, n, want_node) || env_has(env, n, want_cmd));
}

int node_processes(const struct apus_config *cfg, int node, pid_t *out, int max)
{
	char want_config[PATH_MAX + 16], want_node[32], want_cmd[48];
	struct stat id;
	struct dirent *d;
	DIR *proc = opendir("/proc");
	int count = 0, have_id = server_lock_id(cfg, node, &id) == 0;

	if (!proc)
		return 0;
	snprintf(want_config, sizeof(want_config), "APUS_CONFIG=%s", cfg->path);
	snprintf(want_node, sizeof(want_node), "APUS_NODE=%d", node);
	snprintf(want_cmd, sizeof(want_cmd), CHILD_ENV_NODE "=%d", node);
	while ((d = readdir(proc))) {
		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(d->d_name);
		if (pid == getpid() || !host_pid_alive(pid))
			continue;
		if (!(have_id && has_open(pid, &id)) &&
		    !env_names_node(pid, want_config, want_node, want_cmd))
			continue;
		if (count < max)
			out[count] = pid;
		count++;
	}
	closedir(proc);
	return count;
}

/* The pid NODE's pid file names, alive or not (0 if none). */
static pid_t recorded_pid(const struct apus_config *cfg, int node)
{
	char path[PATH_MAX];
	int pid = 0;
	FILE *f;

	if (config_run_path(cfg, node, "apus.pid", path, sizeof(path)) || !(f = fopen(path, "re")))
		return 0;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}

/* The session of PID (0 if it is gone). */
/* PID's parent and session from /proc/PID/stat: 0, or -1 when it is gone. */
static int stat_ids(pid_t pid, pid_t *ppid, pid_t *sid)
{
	char path[64], buf[512], *p;
	int parent = 0, session = 0, rc = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	/* "pid (comm) state ppid pgrp session ...": comm may hold spaces and ')'. */
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) &&
	    sscanf(p + 1, " %*c %d %*d %d", &parent, &session) == 2)
		rc = 0;
	fclose(f);
	*ppid = (pid_t)parent;
	*sid = (pid_t)session;
	return rc;
}

/* The session of PID (0 if it is gone). */
static pid_t session_of(pid_t pid)
{
	pid_t ppid, sid;

	return stat_ids(pid, &ppid, &sid) ? 0 : sid;
}

/* Whether PID works in DIR (its current directory). */
static int works_in(pid_t pid, const char *dir)
{
	char link[64], cwd[PATH_MAX], want[PATH_MAX];
	ssize_t k;

	snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
	k = readlink(link, cwd, sizeof(cwd) - 1);
	if (k <= 0 || !realpath(dir, want))
		return 0;
	cwd[k] = '\0';
	return !strcmp(cwd, want);
}

/* NODE's processes (node_processes) and, while the server recorded last is
 * dead, the live members of its session (host_spawn_node made it a session
 * leader) that work in the node's data directory (the server's children
 * and snapshot_cmd's do): a child that closed the server lock and whose
 * environment the server wrote over (Redis's BGSAVE child) is found only
 * so.  A session keeps its id, the dead server's pid, from being reused;
 * the directory check leaves alone another session that got that id after
 * a reboot. */
static int leftovers(const struct apus_config *cfg, int node, pid_t dead, pid_t *out, int max)
{
	int n = node_processes(cfg, node, out, max);
	struct dirent *d;
	DIR *proc;

	if (dead <= 0 || host_pid_alive(dead) || !(proc = opendir("/proc")))
		return n;
	while ((d = readdir(proc))) {
		pid_t pid = (pid_t)atoi(d->d_name);
		int known = 0;

		if (pid <= 0 || pid == getpid() || session_of(pid) != dead || !host_pid_alive(pid) ||
		    !works_in(pid, cfg->nodes[node].data_dir))
			continue;
		for (int i = 0; i < n && i < max; i++)
			known |= out[i] == pid;
		if (!known && n < max)
			out[n] = pid;
		n += !known;
	}
	closedir(proc);
	return n;
}

int node_end_leftovers(const struct apus_config *cfg, int node, int wait_ms)
{
	pid_t pids[64], dead = recorded_pid(cfg, node);
	int n = leftovers(cfg, node, dead, pids, 64);

	for (int waited = 0; n && waited < wait_ms; waited += 10) {
		for (int i = 0; i < n && i < 64; i++)
			kill(pids[i], SIGKILL);
		host_sleep_ms(10);
		n = leftovers(cfg, node, dead, pids, 64);
	}
	return n;
}

pid_t process_parent(pid_t pid)
{
	pid_t ppid, sid;

	return stat_ids(pid, &ppid, &sid) ? 0 : ppid;
}

pid_t node_server(const struct apus_config *cfg, int node, int *adopted)
{
	pid_t recorded = host_node_pid(cfg, node), holder;

	if (adopted)
		*adopted = 0;
	if (recorded)
		return recorded;
	holder = server_lock_holder(cfg, node);
	if (holder && adopted)
		*adopted = 1;
	return holder;
}

void guard_last_line(const struct apus_config *cfg, int node, char *out, size_t len)
{
	char path[PATH_MAX], buf[4096];
	FILE *f;

	out[0] = '\0';
	if (config_node_path(cfg, node, "apus.guard.log", path, sizeof(path)) ||
	    !(f = fopen(path, "re")))
		return;
	/* The last few lines are enough; the log grows for months. */
	if (fseek(f, -(long)sizeof(buf), SEEK_END) == 0 && !fgets(buf, sizeof(buf), f))
		rewind(f);
	else if (ftell(f) <= 0)
		rewind(f);
	while (fgets(buf, sizeof(buf), f))
		if (buf[0] && buf[0] != '\n')
			snprintf(out, len, "%.*s", (int)strcspn(buf, "\n"), buf);
	fclose(f);
}
