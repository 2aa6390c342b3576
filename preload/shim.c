/* Initialisation and mode of the shim.  Any wrapper can be the first call
 * into us, even from another library's constructor before ours ran, so
 * initialisation is lazy (pthread_once) as well as done by our constructor.
 * Calls we make ourselves while initialising go straight to libc. */
#define LOG_PREFIX "shim: "
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "../coordinator/logger.h"

int shim_mode = MODE_PASSTHROUGH;
int shim_ready;
struct node *shim_node;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static __thread int in_init;

/* One process per node: a second one (an exec'd child that inherited our
 * environment) must not act as the replica too. */
static int claim_node(const char *config, int id)
{
	struct apus_config *cfg = calloc(1, sizeof(*cfg));
	char err[512], path[PATH_MAX];
	int fd, ok = -1;

	if (!cfg)
		return -1;
	if (config_load(config, cfg, err, sizeof(err))) {
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
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		pr_err("node %d already runs in another process (%s is locked)", id, path);
		real.close(fd);
		goto out;
	}
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
	logger_init("apus");
	if (!config || !*config || !id || !*id)
		goto out;	/* not a replica: pure pass-through */
	node = strtol(id, &end, 10);
	if (*end || node < 0 || node >= APUS_MAX_NODES) {
		pr_err("APUS_NODE='%s' is not a node id; refusing application clients", id);
		shim_mode = MODE_FAILED;
		goto out;
	}
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

APUS_EXPORT pid_t fork(void)
{
	pid_t pid;

	real_resolve();
	if (!real.fork) {
		errno = ENOSYS;
		return -1;
	}
	pid = real.fork();
	/* The child (Redis's BGSAVE, say) is not the replica: it has none of
	 * our threads and must never propose. */
	if (pid == 0)
		__atomic_store_n(&shim_mode, MODE_PASSTHROUGH, __ATOMIC_RELAXED);
	return pid;
}
