/* apus stop: stops every process of a node (guard/stop.c does it). */
#include <stdio.h>

#include "guard/host.h"
#include "cli.h"

static const char usage[] =
	"usage: apus stop --config FILE [--node N] [--timeout MS]\n"
	"\n"
	"Stops node N, or every node of the config that lives on this host: its\n"
	"guard first, then its server and every process started for it (found by\n"
	"the node named in their environment, so a server that CRIU restored or\n"
	"that lost its pid file is found too): SIGTERM, then SIGKILL if one has\n"
	"not exited after the timeout.  Waits for an apus start, restore or\n"
	"rebuild acting on the node (up to the timeout) before it stops it.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        only this node\n"
	"  -t, --timeout MS    grace period before SIGKILL (default 10000)\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 every node is stopped; 1 a process could not be stopped\n"
	"(named); 2 usage.\n";

int cmd_stop(int argc, char **argv)
{
	struct cli c;
	int which[APUS_MAX_NODES] = { 0 }, rc, timeout;

	rc = cli_parse(&c, "stop", usage, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	timeout = c.timeout_ms == c.cfg.start_timeout_ms ? 10000 : c.timeout_ms;
	/* A removed node of this host is stopped too if it still runs. */
	for (int i = 0; i < c.cfg.nnodes; i++)
		which[i] = c.node >= 0 ? i == c.node
				       : host_node_is_local(&c.cfg, i) &&
						 (config_is_member(&c.cfg, i) || host_node_pid(&c.cfg, i));
	return host_stop_nodes(&c.cfg, which, timeout, 1);
}
