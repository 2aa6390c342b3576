/* Stopping every process of a node (apus stop, the guard's --service;
 * host.h).  Its guard goes first (it would bring the server back); then,
 * holding the node's owner lock (owner.h) so that no apus start or restore
 * brings up a process behind its back, the server and whatever runs for it, CRIU-restored servers
 * included: SIGTERM, SIGKILL after a grace period. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/storage/region.h"
#include "host.h"
#include "owner.h"

#define MAX_PROCS 256
#define TICK_MS 50

static void stop_guard(const struct apus_config *cfg, int node, int timeout_ms)
{
	pid_t g = host_guard_pid(cfg, node);

	if (!g)
		return;
	kill(g, SIGTERM);
	for (int waited = 0; host_pid_alive(g) && waited < timeout_ms; waited += TICK_MS)
		host_sleep_ms(TICK_MS);
	if (host_pid_alive(g)) {
		host_error("node %d's guard (pid %d) ignored SIGTERM for %d ms: killing it", node,
			   (int)g, timeout_ms);
		kill(g, SIGKILL);
	}
}

/* Signals NODE's server(s): the recorded one and any process of the node
 * whose parent is not one (its children go with it, or after it).  Returns
 * how many processes the node has. */
static int signal_node(const struct apus_config *cfg, int node, int sig, int everyone)
{
	pid_t pids[MAX_PROCS], recorded = host_node_pid(cfg, node);
	int n = node_processes(cfg, node, pids, MAX_PROCS);

	if (n > MAX_PROCS)
		n = MAX_PROCS;
	if (recorded)
		kill(recorded, sig);
	for (int i = 0; i < n; i++) {
		int root = 1;

		if (!everyone) {
			pid_t parent = process_parent(pids[i]);
			for (int j = 0; j < n; j++)
				root &= pids[j] != parent;
		}
		if (everyone || root)
			kill(pids[i], sig);
	}
	return n + (recorded && !n);
}

int host_stop_nodes(const struct apus_config *cfg, const int *which, int timeout_ms,
		    int with_guards)
{
	int fds[APUS_MAX_NODES], running[APUS_MAX_NODES] = { 0 }, left = 0, rc = 0;
	char holder[300];

	for (int i = 0; i < cfg->nnodes; i++) {
		fds[i] = -1;
		if (!which[i])
			continue;
		if (with_guards)
			stop_guard(cfg, i, timeout_ms);
		fds[i] = owner_lock(cfg, i, OWNER_LOCK_FILE, "apus stop", timeout_ms, NULL, holder,
				    sizeof(holder));
		if (fds[i] == -1)
			host_error("node %d: %s still acts on it after %d ms: stopping the node anyway",
				   i, holder, timeout_ms);
		else if (fds[i] == -2)
			host_error("node %d: %s", i, holder);
		running[i] = signal_node(cfg, i, SIGTERM, 0) > 0;
		if (!running[i])
			printf("node %d is not running\n", i);
		left += running[i];
	}
	for (int waited = 0, grace = timeout_ms; left; waited += TICK_MS) {
		host_sleep_ms(TICK_MS);
		for (int i = 0; i < cfg->nnodes; i++) {
			if (!running[i])
				continue;
			pid_t pids[MAX_PROCS], server = host_node_pid(cfg, i);
			int n = node_processes(cfg, i, pids, MAX_PROCS);
			if (n && !server && waited >= TICK_MS * 4) {
				/* The server is gone; what it left (a snapshot child) goes too. */
				signal_node(cfg, i, SIGKILL, 1);
				continue;
			}
			if (n || server) {
				if (waited < grace)
					continue;
				if (waited >= grace + 5000) {
					for (int k = 0; k < n && k < MAX_PROCS; k++)
						host_error("node %d: pid %d survived SIGKILL", i,
							   (int)pids[k]);
					rc = 1;
				} else {
					if (waited < grace + TICK_MS)
						host_error("node %d ignored SIGTERM for %d ms: killing it", i,
							   timeout_ms);
					signal_node(cfg, i, SIGKILL, 1);
					continue;
				}
			} else {
				printf("node %d stopped\n", i);
			}
			char path[PATH_MAX];
			if (!config_run_path(cfg, i, "apus.pid", path, sizeof(path)))
				unlink(path);
			running[i] = 0;
			left--;
		}
	}
	for (int i = 0; i < cfg->nnodes; i++)
		owner_unlock(fds[i]);
	/* Regions of data directories deleted since (and stray temporaries). */
	if (strcmp(cfg->region_dir, "none"))
		region_collect(cfg->region_dir);
	return rc;
}
