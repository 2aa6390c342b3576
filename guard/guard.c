/* apus guard (also run as apus-guard; cli/guard_cmd.c reads its options
 * and calls guard_run, guard.h): one per replica, started by
 * apus start when the config says guard = on.  It watches the node's
 * server; takes checkpoints of it while it is a backup, every
 * checkpoint_interval_s seconds or checkpoint_entries entries; and when
 * the server dies without apus stop, brings it back: from its newest
 * intact checkpoint if it was a backup and CRIU works, else by starting it
 * afresh (it recovers its log from the region file and rebuilds).  A
 * backup the leader's bounded log left behind is replaced by one rebuilt
 * from a peer's snapshot (rebuild.h).
 *
 * The guard is a child subreaper: servers it restores (criu restore -d)
 * or restarts become its children, so it reaps them.  It logs to
 * <data_dir>/apus.guard.log and writes <run_dir>/apus.guard.pid; apus stop
 * stops it before the server.  It holds <run_dir>/apus.guard.lock while it
 * runs (one guard per node), and acts on the node only under the node's
 * owner lock (owner.h): while apus start, restore, rebuild or stop holds
 * it, the guard stands aside and says so once.
 *
 * With --service it is a service's main process (dist/systemd): it starts
 * the node first (or adopts the one running), and stops it when it is told
 * to stop. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "checkpoint.h"
#include "guard.h"
#include "host.h"
#include "owner.h"
#include "rebuild.h"
#include "repair.h"
#include "snapshot_net.h"

#define TICK_MS 100
#define RESTARTS_PER_MINUTE 5

static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void glog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void glog(const char *fmt, ...)
{
	char ts[32];
	time_t now = time(NULL);
	va_list ap;

	strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&now));
	printf("%s guard[%d] ", ts, (int)getpid());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void glog_warn(const char *msg)
{
	glog("%s", msg);
}

struct guard {
	struct apus_config cfg;
	int node;
	int timeout_ms;		/* --service: how long its server may take to be ready */
	char lib[PATH_MAX];
	int criu_ok;
	int last_role;		/* the server's role when last seen alive */
	uint64_t last_ckpt_ms, last_ckpt_idx;
	uint64_t restarts[RESTARTS_PER_MINUTE];	/* when the last ones happened */
	int said_no_rebuild;
	int said_aside;		/* logged that another owner acts on the node */
	int service;		/* --service: starts the node, and stops it on SIGTERM */
	struct repair_state repair;
};

/* The node's owner lock for an action of the guard, without waiting: -1
 * when apus start, restore, rebuild or stop holds it (the guard stands
 * aside, and says so once per stretch). */
static int own_node(struct guard *g)
{
	char holder[300];
	int fd = owner_lock(&g->cfg, g->node, OWNER_LOCK_FILE, "apus guard", 0, NULL, holder,
			    sizeof(holder));

	if (fd == -1 && !g->said_aside)
		glog("standing aside: %s acts on node %d", holder, g->node);
	else if (fd == -2)
		glog("%s", holder);
	g->said_aside = fd == -1;
	return fd < 0 ? -1 : fd;
}

/* NODE's server if one runs, adopting (recording) one that apus did not
 * record: restored or started by someone else. */
static pid_t running_server(struct guard *g)
{
	int adopted;
	pid_t pid = node_server(&g->cfg, g->node, &adopted);

	if (pid && adopted) {
		host_write_pidfile(&g->cfg, g->node, "apus.pid", pid);
		glog("node %d runs as pid %d, which apus had not recorded: guarding it", g->node,
		     (int)pid);
	}
	return pid;
}

static int periodic_due(struct guard *g, uint64_t applied)
{
	const struct apus_config *cfg = &g->cfg;

	/* Nothing executed since the last one: it would be the same state. */
	if (g->last_ckpt_idx && applied == g->last_ckpt_idx)
		return 0;
	if (cfg->checkpoint_interval_s &&
	    host_mono_ms() - g->last_ckpt_ms >= (uint64_t)cfg->checkpoint_interval_s * 1000)
		return 1;
	return cfg->checkpoint_entries && applied >= g->last_ckpt_idx + cfg->checkpoint_entries;
}

static void take_checkpoint(struct guard *g)
{
	struct ckpt_info k;
	char err[600];

	int fd = own_node(g);

	if (fd < 0)
		return;
	g->last_ckpt_ms = host_mono_ms();
	int rc = ckpt_take(&g->cfg, g->node, &k, NULL, err, sizeof(err));
	owner_unlock(fd);
	if (rc) {
		glog("checkpoint failed: %s", err);
		return;
	}
	g->last_ckpt_idx = k.index;
	int gone = ckpt_prune(&g->cfg, g->node, g->cfg.checkpoint_keep);
	glog("checkpoint %s: entry %llu, images %.1f MB, dump %llu ms%s%s", k.id,
	     (unsigned long long)k.index, k.image_bytes / 1e6, (unsigned long long)k.dump_ms,
	     k.drained ? "" : ", its server's unread input in the image",
	     gone ? " (older ones pruned)" : "");
}

/* Whether another restart fits in the budget of RESTARTS_PER_MINUTE. */
static int may_restart(struct guard *g)
{
	uint64_t now = host_mono_ms() / 1000;
	int oldest = 0;

	for (int i = 1; i < RESTARTS_PER_MINUTE; i++)
		if (g->restarts[i] < g->restarts[oldest])
			oldest = i;
	if (g->restarts[oldest] && now - g->restarts[oldest] < 60)
		return 0;
	g->restarts[oldest] = now ? now : 1;
	return 1;
}

static void bring_back_owned(struct guard *g);

static void bring_back(struct guard *g)
{
	int fd = own_node(g);

	if (fd < 0)
		return;
	/* Looked again under the lock: whoever held it may have brought the
	 * node back meanwhile. */
	pid_t pid = running_server(g);
	if (pid)
		glog("node %d is running again (pid %d), brought back by another: nothing to do",
		     g->node, (int)pid);
	else
		bring_back_owned(g);
	owner_unlock(fd);
}

static void bring_back_owned(struct guard *g)
{
	struct ckpt_info used;
	char err[600];
	int node = g->node;

	if (!may_restart(g)) {
		glog("node %d died %d times within a minute: not bringing it back (see apus.log)",
		     node, RESTARTS_PER_MINUTE);
		g->last_role = ROLE_DOWN;	/* until someone starts it again */
		return;
	}
	if (g->last_role == ROLE_BACKUP && g->criu_ok) {
		if (!ckpt_restore(&g->cfg, node, NULL, &used, glog_warn, err, sizeof(err))) {
			glog("node %d died as a backup: restored from checkpoint %s (entry %llu, pid %d)",
			     node, used.id, (unsigned long long)used.index, (int)used.pid);
			return;
		}
		glog("node %d died as a backup; no restore (%s): starting it afresh", node, err);
	} else {
		glog("node %d died as a %s: starting it afresh", node, role_label(g->last_role));
	}
	pid_t pid = host_spawn_node(&g->cfg, node, g->lib);
	if (pid > 0)
		glog("node %d started again (pid %d)", node, (int)pid);
}

/* Replaces NODE's server PID with one rebuilt from peer FROM's snapshot
 * (rebuild.h), under the node's owner lock; WHY for the log (NULL: the
 * caller said it). */
static void rebuild_node(struct guard *g, pid_t pid, int from, const char *why)
{
	struct rebuild_info r;
	char err[600];
	int node = g->node;
	int fd = own_node(g);

	if (fd < 0)
		return;
	if (!may_restart(g) || host_node_pid(&g->cfg, node) != pid) {
		owner_unlock(fd);
		return;
	}
	if (why)
		glog("node %d %s: replacing it with one rebuilt from a peer", node, why);
	kill(pid, SIGKILL);
	for (int waited = 0; host_pid_alive(pid) && waited < 5000; waited += 10) {
		waitpid(pid, NULL, WNOHANG);
		host_sleep_ms(10);
	}
	int rc = node_rebuild(&g->cfg, node, from, g->lib, &r, NULL, err, sizeof(err));
	owner_unlock(fd);
	if (rc) {
		glog("rebuilding node %d failed: %s", node, err);
		return;
	}
	g->last_ckpt_idx = 0;
	char held[64] = ", its stored recovery point";
	if (r.hold_ms)
		snprintf(held, sizeof(held), ", node %d held %llu ms", r.from,
			 (unsigned long long)r.hold_ms);
	glog("node %d rebuilt from node %d's snapshot at entry %llu (%.1f MB%s); pid %d", node, r.from,
	     (unsigned long long)r.index, r.snapshot_bytes / 1e6, held, (int)r.pid);
}

/* The node's server runs but the leader's log no longer holds what it
 * needs: it cannot catch up by itself.  Replace it with one rebuilt from a
 * peer's snapshot (rebuild.h). */
static void rebuild_behind(struct guard *g, pid_t pid)
{
	if (!g->cfg.snapshot_cmd[0]) {
		if (!g->said_no_rebuild)
			glog("node %d is behind the leader's log and cannot be rebuilt: the config "
			     "sets no snapshot_cmd / snapshot_file", g->node);
		g->said_no_rebuild = 1;
		return;
	}
	rebuild_node(g, pid, -1, "is behind the leader's log");
}

/* divergence = repair (repair.h): 1 when it rebuilt the node (or tried). */
static int repair_diverged(struct guard *g, pid_t pid, uint64_t divergences)
{
	int leader;

	if (!repair_due(&g->cfg, g->node, pid, divergences, &g->repair, &leader, glog))
		return 0;
	rebuild_node(g, pid, REBUILD_FROM_LEADER, NULL);
	return 1;
}

/* --service: the node runs when this returns 0 (started now, or adopted). */
static int service_start(struct guard *g)
{
	const struct apus_config *cfg = &g->cfg;
	int node = g->node, ready = 0;
	char holder[300];
	int fd = owner_lock(cfg, node, OWNER_LOCK_FILE, "apus guard --service", g->timeout_ms, NULL,
			    holder, sizeof(holder));

	if (fd < 0) {
		host_error("node %d: %s", node, fd == -1 ? strcat(holder, " still acts on it") : holder);
		return -1;
	}
	pid_t pid = running_server(g);
	if (pid) {
		glog("node %d runs already (pid %d)", node, (int)pid);
		owner_unlock(fd);
		return 0;
	}
	if (host_mkdirs(cfg->nodes[node].data_dir) || host_ensure_key(cfg, node) ||
	    (pid = host_spawn_node(cfg, node, g->lib)) < 0) {
		owner_unlock(fd);
		return -1;
	}
	for (int waited = 0; !ready; waited += TICK_MS) {
		ready = host_node_ready(cfg, node, pid, holder, sizeof(holder));
		if (!ready && waited >= g->timeout_ms) {
			snprintf(holder, sizeof(holder), "node %d was not ready after %d ms", node,
				 g->timeout_ms);
			ready = -1;
		}
		if (ready < 0) {
			host_error("%s (see its apus.log)", holder);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			owner_unlock(fd);
			return -1;
		}
		if (!ready)
			host_sleep_ms(TICK_MS);
	}
	glog("node %d started (pid %d)", node, (int)pid);
	owner_unlock(fd);
	return 0;
}

int guard_run(const struct apus_config *cfg, int node, int timeout_ms, int service)
{
	struct timespec tick = { 0, TICK_MS * 1000000L };
	struct guard g = { .cfg = *cfg, .node = node, .timeout_ms = timeout_ms,
			   .last_role = ROLE_DOWN, .service = service };
	struct sigaction sa = { .sa_handler = on_term };
	char why[300];
	int rc = 0;

	if (host_find_lib(g.lib, sizeof(g.lib)))
		return 1;
	/* Held while this guard runs: one guard per node. */
	int guard_lock = owner_lock(&g.cfg, g.node, GUARD_LOCK_FILE, "apus guard", 0, NULL, why,
				    sizeof(why));
	if (guard_lock == -1) {
		host_error("node %d already has a guard: %s", g.node, why);
		return EXIT_OWNED;
	}
	if (guard_lock == -2) {
		host_error("%s", why);
		return 1;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	host_write_pidfile(&g.cfg, g.node, GUARD_PIDFILE, getpid());
	g.criu_ok = criu_usable(why, sizeof(why)) == 0;
	glog("guarding node %d; %s", g.node,
	     g.criu_ok ? "checkpoints on (CRIU works)" : why);
	g.last_ckpt_ms = host_mono_ms();
	if (g.service && service_start(&g)) {
		owner_unlock(guard_lock);
		return 1;
	}
	/* Peers being rebuilt fetch snapshots of our backup from here. */
	int lfd = -1;
	if (g.cfg.nodes[g.node].guard_port) {
		lfd = snapnet_listen(&g.cfg, g.node, why, sizeof(why));
		if (lfd < 0)
			glog("not serving snapshots to peers: %s", why);
	}

	while (!stop_requested) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		pid_t pid = running_server(&g);
		const struct region_ctl *ctl = region_map_ctl(&g.cfg, g.node);
		int role = ROLE_DOWN, behind = 0, recoverable = 0;
		uint64_t applied = 0, divergences = 0;

		if (ctl) {
			const struct node_status *s = region_status(ctl);
			if (pid && s->pid == (uint64_t)pid) {
				role = s->role;
				applied = load64(&s->applied);
				behind = s->behind;
				recoverable = s->recoverable && s->synced;
				divergences = load64(&s->divergences);
			}
			region_unmap_ctl(ctl);
		}
		if (stop_requested)
			break;
		if (pid) {
			if (role != ROLE_DOWN)
				g.last_role = role;
			if (role == ROLE_BACKUP && behind)
				rebuild_behind(&g, pid);
			else if (role == ROLE_BACKUP && divergences &&
				 repair_diverged(&g, pid, divergences))
				;	/* rebuilt: nothing else this tick */
			/* Only a state that its log can carry to the end: an image of
			 * a node that needs a rebuild would bring back one that still
			 * does (and be the newest point its restore picks). */
			else if (g.criu_ok && role == ROLE_BACKUP && recoverable &&
				 periodic_due(&g, applied))
				take_checkpoint(&g);
		} else if (g.last_role != ROLE_DOWN) {
			bring_back(&g);
		}
		if (lfd >= 0) {
			struct pollfd p = { lfd, POLLIN, 0 };
			if (poll(&p, 1, TICK_MS) > 0)
				snapnet_serve(&g.cfg, g.node, lfd, glog_warn);
		} else {
			nanosleep(&tick, NULL);
		}
	}
	if (lfd >= 0)
		close(lfd);
	char path[PATH_MAX];
	if (!config_run_path(&g.cfg, g.node, GUARD_PIDFILE, path, sizeof(path)))
		unlink(path);
	if (g.service) {
		int which[APUS_MAX_NODES] = { 0 };
		which[g.node] = 1;
		glog("stopping node %d", g.node);
		rc = host_stop_nodes(&g.cfg, which, 10000, 0);
	} else {
		glog("stopping (node %d's server keeps running)", g.node);
	}
	owner_unlock(guard_lock);
	return rc;
}
