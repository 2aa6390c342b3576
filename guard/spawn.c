/* Starting a node's processes, for apus start, restore, rebuild and the
 * guard: its server under libapus.so (with none of the caller's
 * descriptors, in its netns, after its files' modes are checked), the
 * readiness it must reach, and its guard. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/transport/admission.h"
#include "coordinator/storage/filemode.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "checkpoint.h"
#include "host.h"
#include "owner.h"

/* libapus.so: $APUS_LIB, or ../lib/libapus.so or ../lib/apus/libapus.so
 * relative to this executable (build tree and installed layouts). */
int host_find_lib(char *out, size_t len)
{
	static const char *const rel[] = { "../lib/libapus.so", "../lib/apus/libapus.so" };
	const char *env = getenv("APUS_LIB");
	char exe[PATH_MAX], cand[PATH_MAX * 2];
	ssize_t n;

	if (env && *env) {
		if (!realpath(env, out) || access(out, R_OK)) {
			host_error("APUS_LIB=%s: %s", env, strerror(errno));
			return -1;
		}
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -1;
	exe[n] = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(cand, sizeof(cand), "%s/%s", dirname(exe), rel[i]);
		if (realpath(cand, out) && !access(out, R_OK) && strlen(out) < len)
			return 0;
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n] = '\0';
	}
	host_error("cannot find libapus.so beside %s (set APUS_LIB)", exe);
	return -1;
}

int host_mkdirs(const char *path)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	/* The directory itself is private (a data_dir holds the server's state). */
	return mkdir(tmp, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

/* Splits CMD in place into at most MAX-1 words, shell-like: blanks
 * separate words, '...' and "..." quote, backslash escapes one character.
 * Returns the word count, or -1 on an unterminated quote. */
static int split_words(char *cmd, char **argv, int max)
{
	char *in = cmd, *out = cmd;
	int argc = 0;

	for (;;) {
		while (*in == ' ' || *in == '\t')
			in++;
		if (!*in)
			break;
		if (argc == max - 1)
			return -1;
		argv[argc++] = out;
		while (*in && *in != ' ' && *in != '\t') {
			char q = *in;
			if (q == '\'' || q == '"') {
				in++;
				while (*in && *in != q) {
					if (q == '"' && *in == '\\' && in[1])
						in++;
					*out++ = *in++;
				}
				if (*in != q)
					return -1;
				in++;
			} else if (q == '\\' && in[1]) {
				*out++ = in[1];
				in += 2;
			} else {
				*out++ = *in++;
			}
		}
		if (*in)
			in++;
		*out++ = '\0';
	}
	argv[argc] = NULL;
	return argc;
}

/* The cluster key a network transport admits peers with (and guards their
 * snapshot clients): generated here when missing, so a fresh cluster needs
 * no extra step. */
int host_ensure_key(const struct apus_config *cfg, int node)
{
	const char *path = cfg->nodes[node].secret_file;
	int rc;

	if (!strcmp(cfg->transport, "shm") && !cfg->nodes[node].guard_port)
		return 0;
	rc = admit_key_generate(path);
	if (rc < 0) {
		host_error("cannot create the cluster key %s: %s", path, strerror(-rc));
		return -1;
	}
	if (rc == 1)
		printf("generated the cluster key %s (mode 0600); every replica needs a copy\n",
		       path);
	return 0;
}

#ifdef __SANITIZE_ADDRESS__
#include <link.h>

static int find_asan(struct dl_phdr_info *info, size_t size, void *out)
{
	(void)size;
	if (!strstr(info->dlpi_name, "/libasan.so"))
		return 0;
	snprintf(out, PATH_MAX, "%s", info->dlpi_name);
	return 1;
}
#endif

/* In a build under AddressSanitizer (make test-asan) libapus.so needs the
 * ASan runtime, which must come first in the server's LD_PRELOAD: the one
 * this program runs with.  Empty otherwise. */
static void sanitizer_runtime(char *out)
{
	out[0] = '\0';
#ifdef __SANITIZE_ADDRESS__
	dl_iterate_phdr(find_asan, out);
#endif
}

pid_t host_spawn_node(const struct apus_config *cfg, int node, const char *lib)
{
	char cmd[8192], *args[256], logpath[PATH_MAX], id[16], preload[PATH_MAX * 3 + 4];
	char why[PATH_MAX + 200], first[PATH_MAX];
	const char *old = getenv("LD_PRELOAD");
	pid_t pid;

	if (config_app_cmd(cfg, node, cmd, sizeof(cmd))) {
		host_error("%s: app_cmd of node %d is too long once expanded", cfg->path, node);
		return -1;
	}
	config_node_path(cfg, node, "apus.log", logpath, sizeof(logpath));
	if (split_words(cmd, args, 256) <= 0) {
		host_error("%s: app_cmd is empty, has an unterminated quote or too many words",
			   cfg->path);
		return -1;
	}
	snprintf(id, sizeof(id), "%d", node);
	sanitizer_runtime(first);
	snprintf(preload, sizeof(preload), "%s%s%s%s%s", first, first[0] ? " " : "", lib,
		 old && *old ? " " : "", old ? old : "");
	/* The node would refuse them too, but only in its log, after the
	 * wait for readiness: say it here, at once. */
	if (filemode_check_node(cfg, node, why, sizeof(why))) {
		host_error("node %d: %s", node, why);
		return -1;
	}

	int left = node_end_leftovers(cfg, node, LEFTOVER_WAIT_MS);
	if (left) {
		host_error("node %d: %d process%s of its previous server outlived SIGKILL for %d ms: "
			   "not started", node, left, left == 1 ? "" : "es", LEFTOVER_WAIT_MS);
		return -1;
	}

	pid = fork();
	if (pid < 0) {
		host_error("fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		setsid();
		host_redirect_stdio(logpath);
		/* Nothing of the caller's (a script's pipes, bats' files): the
		 * server would hold them for its life, and its CRIU images would
		 * name files that are gone by the time they are restored. */
		close_range(3, ~0U, 0);
		if (cfg->nodes[node].netns[0] && host_enter_netns(cfg->nodes[node].netns) < 0) {
			fprintf(stderr, "apus: cannot enter network namespace %s: %s\n",
				cfg->nodes[node].netns, strerror(errno));
			_exit(127);
		}
		if (chdir(cfg->nodes[node].data_dir) < 0)
			_exit(127);
		setenv("LD_PRELOAD", preload, 1);
		setenv("APUS_CONFIG", cfg->path, 1);
		setenv("APUS_NODE", id, 1);
		execvp(args[0], args);
		fprintf(stderr, "apus: cannot run %s: %s\n", args[0], strerror(errno));
		_exit(127);
	}
	host_write_pidfile(cfg, node, "apus.pid", pid);
	return pid;
}

int host_node_ready(const struct apus_config *cfg, int node, pid_t pid, char *err, size_t len)
{
	int st, ready = 0;

	if (waitpid(pid, &st, WNOHANG) == pid) {
		snprintf(err, len, "node %d exited while starting (%s %d)", node,
			 WIFEXITED(st) ? "status" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		return -1;
	}
	if (!host_pid_alive(pid)) {
		snprintf(err, len, "node %d exited while starting", node);
		return -1;
	}
	const struct region_ctl *ctl = region_map_ctl(cfg, node);
	if (!ctl)
		return 0;
	const struct node_status *s = region_status(ctl);
	if (s->pid == (uint64_t)pid) {
		if (s->role == ROLE_FAILED) {
			snprintf(err, len, "node %d failed to start: %s", node, s->error);
			ready = -1;
		} else {
			ready = s->ready && s->app_listening;
		}
	}
	region_unmap_ctl(ctl);
	return ready;
}

/* Starts NODE's guard (apus guard) in its own session, logging to
 * <data_dir>/apus.guard.log. */
void host_start_guard(const struct apus_config *cfg, int node)
{
	char exe[PATH_MAX], logpath[PATH_MAX], id[16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	pid_t pid;

	if (n < 0 || host_guard_pid(cfg, node))
		return;
	exe[n] = '\0';
	config_node_path(cfg, node, "apus.guard.log", logpath, sizeof(logpath));
	snprintf(id, sizeof(id), "%d", node);
	pid = fork();
	if (pid < 0) {
		host_error("cannot start node %d's guard: %s", node, strerror(errno));
		return;
	}
	if (pid == 0) {
		setsid();
		host_redirect_stdio(logpath);
		close_range(3, ~0U, 0);	/* nothing of the caller's (a test's pipes) */
		execl(exe, "apus", "guard", "--config", cfg->path, "--node", id, (char *)NULL);
		_exit(127);
	}
}
