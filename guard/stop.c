/* apus stop: SIGTERM each node's server, SIGKILL after a grace period. */
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
	"usage: apus stop --config FILE [--node N] [--timeout MS]\n"
	"\n"
	"Stops node N, or every node of the config that lives on this host:\n"
	"SIGTERM, then SIGKILL if it has not exited after the timeout.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        only this node\n"
	"  -t, --timeout MS    grace period before SIGKILL (default 10000)\n"
	"  -h, --help          this text\n";

int cmd_stop(int argc, char **argv)
{
	struct cli c;
	pid_t pids[APUS_MAX_NODES] = { 0 };
	struct timespec tick = { 0, 20 * 1000000 };
	int rc, left = 0, timeout;

	rc = cli_parse(&c, "stop", usage, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	timeout = c.timeout_ms == c.cfg.start_timeout_ms ? 10000 : c.timeout_ms;
	/* Guards first: a guard would bring its stopped server back. */
	for (int i = 0; i < c.cfg.nnodes; i++) {
		if (c.node >= 0 ? i != c.node : !cli_node_is_local(&c.cfg, i))
			continue;
		pid_t g = cli_guard_pid(&c.cfg, i);
		if (!g)
			continue;
		kill(g, SIGTERM);
		for (int waited = 0; cli_pid_alive(g) && waited < timeout; waited += 20)
			nanosleep(&tick, NULL);
		if (cli_pid_alive(g))
			kill(g, SIGKILL);
	}
	for (int i = 0; i < c.cfg.nnodes; i++) {
		if (c.node >= 0 ? i != c.node : !cli_node_is_local(&c.cfg, i))
			continue;
		pids[i] = cli_node_pid(&c.cfg, i);
		if (!pids[i]) {
			printf("node %d is not running\n", i);
			continue;
		}
		kill(pids[i], SIGTERM);
		left++;
	}
	for (int waited = 0; left; waited += 20) {
		for (int i = 0; i < c.cfg.nnodes; i++) {
			if (!pids[i] || cli_pid_alive(pids[i]))
				continue;
			char path[PATH_MAX];
			config_node_path(&c.cfg, i, "apus.pid", path, sizeof(path));
			unlink(path);
			printf("node %d stopped\n", i);
			pids[i] = 0;
			left--;
		}
		if (left && waited >= timeout) {
			for (int i = 0; i < c.cfg.nnodes; i++)
				if (pids[i]) {
					cli_error("node %d (pid %d) ignored SIGTERM for %d ms: killing it",
						  i, (int)pids[i], timeout);
					kill(pids[i], SIGKILL);
				}
			timeout += 5000;
		}
		if (left)
			nanosleep(&tick, NULL);
	}
	return 0;
}
