/* Initialisation and mode of the shim.  Any wrapper can be the first call
 * into us, even from another library's constructor before ours ran, so
 * initialisation is lazy (pthread_once) as well as done by our constructor.
 * Calls we make ourselves while initialising go straight to libc. */
#define LOG_PREFIX "shim: "
#include "shim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/file.h>
#include <unistd.h>

#include "coordinator/node/input_child.h"
#include "coordinator/input/input_clock.h"
#include "coordinator/input/input_random.h"
#include "common/logger.h"
#include "coordinator/node/members.h"

int shim_mode = MODE_PASSTHROUGH;
int shim_ready;
struct node *shim_node;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static __thread int in_init;

/* The server's command line as it started: servers rewrite their argv
 * for a process title (Redis does), so it is read before main() runs. */
static char *start_args;
static size_t start_args_len;
/* ... and the signal mask it started with: the re-exec happens on our role
 * thread, which blocks every signal, and execve() keeps the caller's mask
 * (a re-executed Redis ignored SIGTERM: apus stop had to kill it). */
static sigset_t start_mask;
/* ... and its environment, copied before main() runs: the re-exec may come
 * while the server rewrites environ (Redis's setproctitle clears and
 * rebuilds it at the top of main), and an execv() of environ then lost
 * LD_PRELOAD or APUS_NODE: the fresh server ran without us. */
static char **start_env;

extern char **environ;

static void save_environ(void)
{
	size_t n = 0;

	while (environ && environ[n])
		n++;
	start_env = calloc(n + 1, sizeof(*start_env));
	for (size_t i = 0; start_env && i < n; i++)
		if (!(start_env[i] = strdup(environ[i]))) {
			start_env = NULL;	/* leaked: out of memory at start */
			return;
		}
}

static void save_cmdline(void)
{
	char buf[65536];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t k, len = 0;

	if (fd < 0)
		return;
	while (len < (ssize_t)sizeof(buf) && (k = real.read(fd, buf + len, sizeof(buf) - (size_t)len)) > 0)
		len += k;
	real.close(fd);
	if (len <= 0 || len == (ssize_t)sizeof(buf))
		return;
	start_args = malloc((size_t)len);
	if (start_args) {
		memcpy(start_args, buf, (size_t)len);
		start_args_len = (size_t)len;
	}
}

/* A deposed leader's server may hold state the new view lost, and its
 * clients' connections belong to a leader that is no more: the server is
 * started afresh, as the same process (same pid, same environment), and
 * its new shim replays the durable log into it as a backup.  Descriptors
 * other than stdio are closed across the exec: the listening sockets must
 * be free for the new server.  Returns only if the exec failed. */
/* The children of the server being replaced (a BGSAVE child, our
 * snapshot_cmd's tree): the fresh server loads the recovery point's
 * snapshot file, and a save child of the old one that finished after the
 * file was put in place would rename its own over it.  They are killed,
 * and waited for (up to a second) until none can still write.  Returns how
 * many outlived that. */
static int end_children(void)
{
	int left = 0;

	for (int tries = 0; tries < 100; tries++) {
		DIR *proc = opendir("/proc");
		struct dirent *d;

		if (!proc)
			return 0;
		left = 0;
		while ((d = readdir(proc))) {
			char path[64], buf[512], *p, state;
			int pid = atoi(d->d_name), ppid, pgrp, sid;
			FILE *f;

			if (pid <= 0)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/stat", pid);
			if (!(f = fopen(path, "re")))
				continue;
			p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
			fclose(f);
			/* "pid (comm) state ppid pgrp session ...": comm may hold ')'. */
			if (!p || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4 ||
			    ppid != getpid() || state == 'Z' || state == 'X')
				continue;
			kill(pid, SIGKILL);
			if (sid == pid)
				kill(-pid, SIGKILL);	/* snapshot_cmd's session */
			left++;
		}
		closedir(proc);
		if (!left)
			break;
		usleep(10000);
	}
	return left;
}

static void shim_reexec(struct node *n)
{
	char *argv[1024];
	size_t argc = 0;

	(void)n;
	if (!start_args || !start_env) {
		pr_err("cannot re-execute the server: its command line or environment is unknown; "
		       "refusing clients");
		return;
	}
	for (size_t at = 0; at < start_args_len && argc < 1023; at += strlen(start_args + at) + 1)
		argv[argc++] = start_args + at;
	argv[argc] = NULL;
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		pr_perror("close_range");
	int left = end_children();
	if (left)
		pr_warn("%d child%s of the server outlived SIGKILL for a second: re-executing "
			"anyway", left, left == 1 ? "" : "ren");
	pr_info("re-executing %s to replay the log into a fresh server", argv[0]);
	pthread_sigmask(SIG_SETMASK, &start_mask, NULL);
	/* By its path where it still has one: through /proc/self/exe the
	 * process would be named "exe" (ps, top, pkill memcached). */
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k > 0 && (size_t)k < sizeof(exe) - 1) {
		exe[k] = '\0';
		if (!strstr(exe, " (deleted)"))
			execve(exe, argv, start_env);
	}
	execve("/proc/self/exe", argv, start_env);
	pr_perror("cannot re-execute the server; refusing clients");
}

/* The node's lock (apus.lock), held for the life of the process; -1 when
 * this process is not a replica. */
static int node_lock_fd = -1;

/* flock() with a bound: a process that held the lock may be on its way out
 * (a killed replica's server while the kernel tears it down). */
static int lock_node_file(int fd, const char *path)
{
	for (int waited_ms = 0;; waited_ms += 50) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK || waited_ms >= 5000)
			return -1;
		if (waited_ms == 0)
			pr_info("%s is locked; waiting up to 5 s for its holder to end", path);
		usleep(50 * 1000);
	}
}

/* One process per node: a second one (an exec'd child that inherited our
 * environment) must not act as the replica too. */
static int claim_node(const char *config, int id)
{
	struct apus_config *cfg = calloc(1, sizeof(*cfg));
	char err[512], path[PATH_MAX];
	int fd, ok = -1;

	if (!cfg)
		return -1;
	if (id < 0 || members_config_load(config, id, cfg, path, sizeof(path), err, sizeof(err))) {
		pr_err("%s", err);
		goto out;
	}
	if (id < 0 || id >= cfg->nnodes) {
		pr_err("%s: APUS_NODE=%d is not a node of the config", config, id);
		goto out;
	}
	if (config_node_path(cfg, id, "apus.lock", path, sizeof(path)))
		goto out;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		pr_perror("cannot open %s", path);
		goto out;
	}
	if (lock_node_file(fd, path) < 0) {
		pr_err("node %d already runs in another process (%s is locked)", id, path);
		real.close(fd);
		goto out;
	}
	node_lock_fd = fd;
	ok = 0;	/* the lock is held for the life of the process */
out:
	free(cfg);
	return ok;
}

static void shim_init(void)
{
	const char *config = getenv("APUS_CONFIG");
	const char *id = getenv("APUS_NODE");
	char err[512], *end;
	long node;

	in_init = 1;
	real_resolve();
	sys_use(&real);	/* the coordinator's own calls skip our wrappers */
	logger_init("apus");
	if (!config || !*config || !id || !*id)
		goto out;	/* not a replica: pure pass-through */
	node = strtol(id, &end, 10);
	if (*end || node < 0 || node >= APUS_MAX_NODES) {
		pr_err("APUS_NODE='%s' is not a node id; refusing application clients", id);
		shim_mode = MODE_FAILED;
		goto out;
	}
	save_cmdline();
	save_environ();
	pthread_sigmask(SIG_SETMASK, NULL, &start_mask);
	node_reexec_hook = shim_reexec;
	if (claim_node(config, (int)node)) {
		shim_mode = MODE_FAILED;
		goto out;
	}
	shim_node = node_start(config, (int)node, err, sizeof(err));
	if (!shim_node) {
		pr_err("%s; refusing application clients", err);
		shim_mode = MODE_FAILED;
		goto out;
	}
	node_set_input_pending(shim_node, readahead_pending);
	node_set_point_cut(shim_node, answers_cut);
	node_set_point_conn(shim_node, point_conns_at_fork);
	if (input_random_init(node_config(shim_node), err, sizeof(err)))
		pr_err("%s", err);
	shim_mode = MODE_ACTIVE;
out:
	in_init = 0;
	/* Pairs with the acquire load in shim_enter(). */
	__atomic_store_n(&shim_ready, 1, __ATOMIC_RELEASE);
}

void shim_init_slow(void)
{
	real_resolve();
	if (in_init)
		return;	/* our own call during initialisation: mode is still pass-through */
	pthread_once(&init_once, shim_init);
}

__attribute__((constructor)) static void shim_constructor(void)
{
	shim_init_slow();
}

__thread int shim_app_thread;

APUS_EXPORT pid_t fork(void)
{
	pid_t pid;
	int active = shim_node && __atomic_load_n(&shim_mode, __ATOMIC_RELAXED) == MODE_ACTIVE;
	int snapshot = 0;

	real_resolve();
	if (!real.fork) {
		errno = ENOSYS;
		return -1;
	}
	/* A snapshot under way learns which state the child holds. */
	if (active)
		snapshot = node_snapshot_fork(shim_node);
	/* A leader's point: which clients it may cut a request of.  Any
	 * point: which connection each descriptor serves (sessions.h). */
	if (snapshot) {
		answers_fork();
		point_conns_fork();
	}
	pid = real.fork();
	/* The child (Redis's BGSAVE, say) is not the replica: it has none of
	 * our threads and must never propose.  Nor may it hold the node's
	 * lock: a re-executed server (a deposed leader) or a restarted one
	 * must get it while the child still writes its snapshot. */
	if (pid == 0) {
		__atomic_store_n(&shim_mode, MODE_PASSTHROUGH, __ATOMIC_RELAXED);
		if (shim_node)
			node_forget_in_child(shim_node);
		if (node_lock_fd >= 0) {
			real.close(node_lock_fd);
			node_lock_fd = -1;
		}
	} else if (pid > 0 && active && !snapshot) {
		/* The server's child: its end is ordered by the log
		 * (input_child.h), known by the entry this thread handled
		 * last (a fork from the server's timers has its twins on the
		 * other replicas under other entries: input_child.c matches
		 * them).  Not the node's own snapshot, asked on the admin
		 * socket. */
		input_child_forked(pid, input_entry);
	}
	return pid;
}
