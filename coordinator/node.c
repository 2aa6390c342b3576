/* Node life cycle: create the region, open the transport, pick the role of
 * view 0, start the role's thread and the fsync thread. */
#define LOG_PREFIX "node: "
#include "node.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
#include "replay.h"

/* Spinning only pays while the peer we wait for has a core of its own; on
 * a 2-core machine running three replicas it mostly steals that core. */
#define DEFAULT_SPIN_US 5

static uint64_t realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void node_update_status(struct node *n)
{
	struct node_status *s = &n->ctl->status;

	s->view = n->view;
	s->role = n->role;
	s->leader = n->leader;
	s->commit = __atomic_load_n(&n->commit, __ATOMIC_RELAXED);
	s->applied = __atomic_load_n(&n->applied, __ATOMIC_RELAXED);
	s->peers_connected = __atomic_load_n(&n->connected, __ATOMIC_RELAXED) | (1u << n->self);
	store64(&s->updated_ms, realtime_ms());
}

/* Makes log bytes [pos, pos+len) durable when fsync = always. */
void node_persist(struct node *n, uint64_t pos, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a, b;

	if (n->cfg.fsync != FSYNC_ALWAYS || !len)
		return;
	a = (uintptr_t)(n->log + pos % n->log_size);
	b = a + len;
	a &= ~(uintptr_t)(pg - 1);
	if (msync((void *)a, b - a, MS_SYNC) < 0)
		pr_perror("msync of the log failed");
}

/* fsync = batch: the log reaches the disk at least every interval. */
static void *sync_main(void *arg)
{
	struct node *n = arg;
	struct timespec ts = { n->cfg.fsync_interval_ms / 1000,
			       (long)(n->cfg.fsync_interval_ms % 1000) * 1000000 };
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!__atomic_load_n(&n->stopping, __ATOMIC_RELAXED)) {
		nanosleep(&ts, NULL);
		if (fdatasync(n->region_fd) < 0)
			pr_perror("fdatasync of the log failed");
	}
	return NULL;
}

static void *role_main(void *arg)
{
	struct node *n = arg;
	sigset_t all;

	/* Signals belong to the server's own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	return n->role == ROLE_LEADER ? leader_main(n) : backup_main(n);
}

struct node *node_start(const char *config_path, int self, char *err, size_t errlen)
{
	struct node *n = calloc(1, sizeof(*n));
	void *base;
	int rc;

	if (!n) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (config_load(config_path, &n->cfg, err, errlen))
		goto fail;
	if (self < 0 || self >= n->cfg.nnodes) {
		snprintf(err, errlen, "%s: node %d is not in the config (it has %d)",
			 n->cfg.path, self, n->cfg.nnodes);
		goto fail;
	}
	n->ops = transport_find(n->cfg.transport);
	if (!n->ops) {
		snprintf(err, errlen, "%s: transport '%s' is not available in this build",
			 n->cfg.path, n->cfg.transport);
		goto fail;
	}
	n->self = self;
	n->quorum = config_quorum(&n->cfg);
	n->view = 0;
	n->leader = (int)(n->view % (uint64_t)n->cfg.nnodes);
	n->role = n->leader == self ? ROLE_LEADER : ROLE_BACKUP;
	n->log_size = n->cfg.log_size;
	n->spin_ns = DEFAULT_SPIN_US * 1000ULL;
	const char *spin = getenv("APUS_SPIN_US");
	if (spin && *spin)
		n->spin_ns = strtoull(spin, NULL, 10) * 1000ULL;
	pthread_mutex_init(&n->lock, NULL);

	rc = region_create(&n->cfg, self, &base, &n->region_fd);
	if (rc) {
		snprintf(err, errlen, "cannot create the region in %s: %s",
			 n->cfg.nodes[self].data_dir, strerror(-rc));
		goto fail;
	}
	n->region = base;
	n->region_size = region_size_for(n->log_size);
	n->ctl = base;
	n->log = n->region + REGION_CTL_SIZE;
	rc = n->ops->open(&n->cfg, self, n->region, n->region_size, &n->tp);
	if (rc) {
		snprintf(err, errlen, "transport %s failed to open: %s", n->ops->name, strerror(-rc));
		goto fail;
	}
	if (n->role == ROLE_BACKUP) {
		n->replay = replay_new(n);
		if (!n->replay) {
			snprintf(err, errlen, "cannot set up replay: out of memory");
			goto fail;
		}
	}
	node_update_status(n);
	if (n->cfg.fsync == FSYNC_BATCH) {
		if (pthread_create(&n->sync_thread, NULL, sync_main, n)) {
			snprintf(err, errlen, "cannot start the fsync thread");
			goto fail;
		}
		n->sync_started = 1;
	}
	if (pthread_create(&n->thread, NULL, role_main, n)) {
		snprintf(err, errlen, "cannot start the %s thread",
			 n->role == ROLE_LEADER ? "leader" : "backup");
		goto fail;
	}
	pr_info("node %d of %d started as %s of view %llu (transport %s, log %llu bytes, fsync %s)",
		self, n->cfg.nnodes, n->role == ROLE_LEADER ? "leader" : "backup",
		(unsigned long long)n->view, n->ops->name, (unsigned long long)n->log_size,
		fsync_policy_name(n->cfg.fsync));
	return n;
fail:
	/* Threads never started here; the mapping stays (the CLI reads the
	 * error from it) and the node struct is kept for status. */
	if (n->ctl) {
		n->ctl->status.role = ROLE_FAILED;
		snprintf(n->ctl->status.error, sizeof(n->ctl->status.error), "%s", err);
		store64(&n->ctl->status.updated_ms, realtime_ms());
	}
	return NULL;
}
