/* apus start: runs each node's server under libapus.so and waits until it
 * is ready (listening, and the leader has reached a majority). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
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
#include "guard/checkpoint.h"
#include "guard/host.h"
#include "guard/owner.h"
#include "cli.h"

static const char usage[] =
	"usage: apus start --config FILE [--node N] [--timeout MS]\n"
	"\n"
	"Starts node N of the cluster, or every node of the config that lives on\n"
	"this host, each as LD_PRELOAD=libapus.so <app_cmd>, and waits until each\n"
	"is ready: its server listens and a leader has reached a majority.  Without\n"
	"--node it also waits until a leader serves (nodes that restart from their\n"
	"logs elect one) and names it.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        only this node\n"
	"  -t, --timeout MS    how long to wait for readiness (default: start_timeout_ms)\n"
	"  -h, --help          this text\n"
	"\n"
	"A node that runs already is left as it is (and its guard started if the\n"
	"config wants one and none runs); one that apus restore, rebuild or its\n"
	"guard is acting on is waited for, up to the timeout.\n"
	"\n"
	"Exit status: 0 every node asked for runs (started now or before); 1 one\n"
	"could not be started, or no leader came; 2 usage.\n"
	"\n"
	"Each node writes <run_dir>/apus.pid and logs to <data_dir>/apus.log.\n"
	"A node with netns = NAME runs in that network namespace (ip netns).\n"
	"With transport tcp or rdma, a missing secret_file (the cluster key)\n"
	"is generated, mode 0600; copy it to every replica's host.\n"
	"libapus.so is taken from $APUS_LIB, else from beside this program.\n";

static void print_log_tail(const char *path)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "tail -n 5 '%s' >&2", path);
	if (system(cmd) != 0)
		return;
}

/* The node that serves as leader, as far as this host can see: one of
 * ours that leads and is ready, or the one a backup of ours follows and
 * whose region is not on this host.  -1 if none yet. */
static int serving_leader(const struct apus_config *cfg, uint64_t *view)
{
	int found = -1;

	for (int i = 0; i < cfg->nnodes && found < 0; i++) {
		const struct region_ctl *ctl = region_map_ctl(cfg, i);

		if (!ctl)
			continue;
		const struct node_status *s = region_status(ctl);
		/* Not a zombie's page: a leader killed a moment ago still says
		 * it serves, and answers kill(0) until it is reaped. */
		if (s->pid && host_pid_alive((pid_t)s->pid)) {
			if (s->role == ROLE_LEADER && s->ready)
				found = i;
			else if (s->role == ROLE_BACKUP && s->leader >= 0 && s->leader < cfg->nnodes &&
				 !host_node_is_local(cfg, s->leader))
				found = s->leader;
			*view = s->view;
		}
		region_unmap_ctl(ctl);
	}
	return found;
}

/* Nodes that come back from their logs start as backups and elect a
 * leader among themselves: a start of every node returns once one serves
 * (a start of one node, a restart, does not wait for the others). */
static int wait_for_leader(const struct apus_config *cfg, int timeout_ms)
{
	struct timespec tick = { 0, 20 * 1000000 };
	uint64_t view = 0;
	int leader;

	for (int waited = 0; (leader = serving_leader(cfg, &view)) < 0; waited += 20) {
		if (waited >= timeout_ms) {
			cli_error("no leader serves %d ms after the start: every node is up, but "
				  "no majority elected one (see apus status and the nodes' apus.log)",
				  timeout_ms);
			return 1;
		}
		nanosleep(&tick, NULL);
	}
	printf("leader: node %d (view %llu)\n", leader, (unsigned long long)view);
	return 0;
}

/* The nodes this apus start starts: their new servers and owner locks. */
struct starting {
	pid_t pids[APUS_MAX_NODES];
	int want[APUS_MAX_NODES];	/* started, not ready yet */
	int locks[APUS_MAX_NODES];
	int count;			/* how many want */
};

/* Starts node I under its owner lock, unless it runs already (then
 * records and guards it).  0, or -1 (said why; the caller abandons). */
static int start_node(const struct cli *c, int i, const char *lib, struct starting *st)
{
	char holder[300];
	int adopted;

	st->locks[i] = owner_lock(&c->cfg, i, OWNER_LOCK_FILE, "apus start", c->timeout_ms, NULL,
				  holder, sizeof(holder));
	if (st->locks[i] == -1) {
		cli_error("node %d: %s still acts on it after %d ms: not started", i, holder,
			  c->timeout_ms);
		return -1;
	}
	if (st->locks[i] == -2) {
		cli_error("node %d: %s", i, holder);
		return -1;
	}
	pid_t running = node_server(&c->cfg, i, &adopted);
	if (running) {
		if (adopted)
			host_write_pidfile(&c->cfg, i, "apus.pid", running);
		printf("node %d is already running (pid %d%s)\n", i, (int)running,
		       adopted ? ", which apus had not recorded: recorded now" : "");
		if (c->cfg.guard)
			host_start_guard(&c->cfg, i);
		owner_unlock(st->locks[i]);
		st->locks[i] = -1;
		return 0;
	}
	if (host_mkdirs(c->cfg.nodes[i].data_dir)) {
		cli_error("cannot create data_dir %s of node %d: %s", c->cfg.nodes[i].data_dir, i,
			  strerror(errno));
		return -1;
	}
	if (host_ensure_key(&c->cfg, i))
		return -1;
	st->pids[i] = host_spawn_node(&c->cfg, i, lib);
	if (st->pids[i] < 0)
		return -1;
	st->want[i] = 1;
	st->count++;
	return 0;
}

/* Node I is ready (its status in S): says so, hands it to its guard. */
static void node_is_ready(const struct cli *c, int i, const struct node_status *s,
			  struct starting *st)
{
	printf("node %d started: %s, pid %d, app %s:%d\n", i, role_label(s->role), (int)st->pids[i],
	       c->cfg.nodes[i].address, c->cfg.nodes[i].app_port);
	if (!s->recoverable && c->cfg.guard)
		printf("node %d cannot rebuild its state from its snapshot and log (it will not "
		       "lead); its guard rebuilds it from a peer once a leader serves\n", i);
	else if (!s->recoverable)
		printf("node %d cannot rebuild its state from its snapshot and log (it will not "
		       "lead); once a leader serves: apus stop --config %s --node %d; apus rebuild "
		       "--config %s --node %d\n", i, c->cfg.path, i, c->cfg.path, i);
	if (c->cfg.guard)
		host_start_guard(&c->cfg, i);
	owner_unlock(st->locks[i]);
	st->locks[i] = -1;
	st->want[i] = 0;
	st->count--;
}

/* Waits until every node started is ready: 0, or -1 (said why). */
static int wait_ready(const struct cli *c, struct starting *st)
{
	struct timespec tick = { 0, 20 * 1000000 };

	for (int waited = 0; st->count; waited += 20) {
		for (int i = 0; i < c->cfg.nnodes; i++) {
			char logpath[PATH_MAX], err[300];

			if (!st->want[i])
				continue;
			config_node_path(&c->cfg, i, "apus.log", logpath, sizeof(logpath));
			int ok = host_node_ready(&c->cfg, i, st->pids[i], err, sizeof(err));
			if (ok < 0) {
				cli_error("%s; last lines of %s:", err, logpath);
				print_log_tail(logpath);
				if (!host_pid_alive(st->pids[i]))
					st->pids[i] = 0;
				return -1;
			}
			const struct region_ctl *ctl = ok ? region_map_ctl(&c->cfg, i) : NULL;
			if (!ctl)
				continue;
			node_is_ready(c, i, region_status(ctl), st);
			region_unmap_ctl(ctl);
		}
		if (!st->count)
			break;
		if (waited >= c->timeout_ms) {
			for (int i = 0; i < c->cfg.nnodes; i++)
				if (st->want[i]) {
					char logpath[PATH_MAX];
					config_node_path(&c->cfg, i, "apus.log", logpath, sizeof(logpath));
					cli_error("node %d was not ready after %d ms (see %s)", i,
						  c->timeout_ms, logpath);
				}
			return -1;
		}
		nanosleep(&tick, NULL);
	}
	return 0;
}

/* Leaves nothing half-started behind. */
static void abandon(const struct apus_config *cfg, struct starting *st)
{
	for (int i = 0; i < cfg->nnodes; i++) {
		if (st->pids[i] > 0) {
			kill(st->pids[i], SIGKILL);
			waitpid(st->pids[i], NULL, 0);
		}
		owner_unlock(st->locks[i]);
	}
}

int cmd_start(int argc, char **argv)
{
	static struct starting st;
	struct cli c;
	char lib[PATH_MAX];
	int rc;

	memset(&st, 0, sizeof(st));
	for (int i = 0; i < APUS_MAX_NODES; i++)
		st.locks[i] = -1;
	rc = cli_parse(&c, "start", usage, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (host_find_lib(lib, sizeof(lib)))
		return 1;
	if (c.cfg.guard && (c.cfg.checkpoint_interval_s || c.cfg.checkpoint_entries)) {
		char why[300];
		if (criu_usable(why, sizeof(why)))
			cli_error("checkpoints are off: %s; replication runs without them", why);
	}
	for (int i = 0; i < c.cfg.nnodes; i++) {
		if (c.node >= 0 ? i != c.node : !host_node_is_local(&c.cfg, i))
			continue;
		if (!config_is_member(&c.cfg, i)) {
			if (c.node < 0)
				continue;
			cli_error("node %d was removed from the cluster (its config section says "
				  "member = removed): not started", i);
			return 2;
		}
		if (start_node(&c, i, lib, &st)) {
			abandon(&c.cfg, &st);
			return 1;
		}
	}
	if (!st.count && c.node < 0) {
		int any = 0;
		for (int i = 0; i < c.cfg.nnodes; i++)
			any |= host_node_is_local(&c.cfg, i);
		if (!any) {
			cli_error("%s: no node of this config lives on this host (use --node N)",
				  c.cfg.path);
			return 1;
		}
	}
	int started = st.count;
	if (wait_ready(&c, &st)) {
		abandon(&c.cfg, &st);
		return 1;
	}
	if (c.node < 0 && started)
		return wait_for_leader(&c.cfg, c.timeout_ms);
	return 0;
}
