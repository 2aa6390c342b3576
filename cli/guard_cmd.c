/* apus guard, also run as apus-guard: its options; the guard itself is
 * guard/guard.c. */
#include <string.h>

#include "guard/guard.h"
#include "guard/host.h"
#include "cli.h"

static const char usage[] =
	"usage: apus guard --config FILE --node N [--service]\n"
	"       apus guard --config FILE --service\n"
	"       apus-guard --config FILE --node N\n"
	"\n"
	"Supervises node N's server (apus start runs it when the config has\n"
	"guard = on): checkpoints the node while it is a backup, every\n"
	"checkpoint_interval_s seconds and/or checkpoint_entries entries (keeping\n"
	"checkpoint_keep), and brings the server back when it dies: restored from\n"
	"its newest intact checkpoint if it was a backup, else started afresh.\n"
	"A backup the leader's log left behind (apus status: needs rebuild) is\n"
	"rebuilt from a peer's snapshot (apus rebuild; needs snapshot_cmd).\n"
	"With guard_port set for its node it serves snapshots of its backup to\n"
	"peers being rebuilt, on the node's address (cluster key required).\n"
	"Without a working CRIU it only restarts.  SIGTERM stops it (the server\n"
	"keeps running).  Logs to <data_dir>/apus.guard.log.  While apus start,\n"
	"restore, rebuild or stop acts on the node, the guard stands aside.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        the node to guard (required, but with --service: the\n"
	"                      one node of the config that lives on this host)\n"
	"      --service       run as a service's main process (systemd): start the\n"
	"                      node's server (or adopt the running one) first, and\n"
	"                      on SIGTERM stop it and every process of the node\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 stopped by SIGTERM; 1 the node could not be started\n"
	"(--service) or another error; 2 usage; 3 the node already has a guard.\n";

/* --service without --node: the one node of the config on this host. */
static int local_node(const struct apus_config *cfg)
{
	int found = -1;

	for (int i = 0; i < cfg->nnodes; i++) {
		if (!host_node_is_local(cfg, i) || !config_is_member(cfg, i))
			continue;
		if (found >= 0) {
			cli_error("guard: nodes %d and %d of %s both live on this host: say which with "
				  "--node N", found, i, cfg->path);
			return -1;
		}
		found = i;
	}
	if (found < 0)
		cli_error("guard: no node of %s lives on this host (use --node N)", cfg->path);
	return found;
}

int cmd_guard(int argc, char **argv)
{
	struct cli c;
	char *rest[64];
	int n = 0, rc, service = 0;

	/* --service is the guard's own flag; the rest are the common options. */
	for (int i = 0; i < argc && n < 63; i++) {
		if (i && !strcmp(argv[i], "--service"))
			service = 1;
		else
			rest[n++] = argv[i];
	}
	rest[n] = NULL;
	rc = cli_parse(&c, "guard", usage, n, rest);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (c.node < 0 && service && (c.node = local_node(&c.cfg)) < 0)
		return 2;
	if (c.node < 0) {
		cli_error("guard: --node N is required");
		return 2;
	}
	return guard_run(&c.cfg, c.node, c.timeout_ms, service);
}
