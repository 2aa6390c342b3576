/* What every apus command shares: its errors and its options.  The
 * commands themselves are one file each; apus.c dispatches.  The nodes'
 * processes on this host (pids, spawning, stopping) are guard/host.h's. */
#include <getopt.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/node/members.h"
#include "cli.h"
#include "guard/host.h"

void cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	host_verror(fmt, ap);
	va_end(ap);
}

int cli_parse(struct cli *c, const char *cmd, const char *usage, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "node", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "since", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[600], *end;
	int o;

	memset(c, 0, sizeof(*c));
	c->node = -1;
	c->config_path = getenv("APUS_CONFIG");
	opterr = 0;
	optind = 1;
	while ((o = getopt_long(argc, argv, "c:n:jt:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			c->config_path = optarg;
			break;
		case 'n':
			c->node = (int)strtol(optarg, &end, 10);
			if (*end || c->node < 0) {
				cli_error("%s: --node wants a node id, not '%s'", cmd, optarg);
				return -1;
			}
			break;
		case 'j':
			c->json = 1;
			break;
		case 't':
			c->timeout_ms = (int)strtol(optarg, &end, 10);
			if (*end || c->timeout_ms <= 0) {
				cli_error("%s: --timeout wants milliseconds, not '%s'", cmd, optarg);
				return -1;
			}
			break;
		case 's':
			c->since = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return 1;
		default:
			cli_error("%s: unknown option '%s' (see 'apus %s --help')", cmd,
				  argv[optind - 1], cmd);
			return -1;
		}
	}
	if (optind < argc) {
		cli_error("%s: unexpected argument '%s' (see 'apus %s --help')", cmd, argv[optind],
			  cmd);
		return -1;
	}
	if (!c->config_path) {
		cli_error("%s: --config FILE is required (or set APUS_CONFIG)", cmd);
		return -1;
	}
	if (config_load(c->config_path, &c->cfg, err, sizeof(err))) {
		cli_error("%s", err);
		return -1;
	}
	/* A membership agreed since the file was written wins (members.h). */
	members_follow(&c->cfg, NULL, 0);
	if (c->node >= c->cfg.nnodes) {
		cli_error("%s: node %d is not in %s (it has nodes 0..%d)", cmd, c->node,
			  c->cfg.path, c->cfg.nnodes - 1);
		return -1;
	}
	if (!c->timeout_ms)
		c->timeout_ms = c->cfg.start_timeout_ms;
	return 0;
}

const char *cli_take_option(int argc, char **argv, const char *name, char shrt, char **rest,
			    int *n)
{
	const char *v = NULL;
	char s[3] = { '-', shrt, '\0' };
	size_t len = strlen(name);

	*n = 0;
	for (int i = 0; i < argc && *n < 63; i++) {
		const char *a = argv[i];

		if (i + 1 < argc && (!strcmp(a, s) || (!strncmp(a, "--", 2) && !strcmp(a + 2, name))))
			v = argv[++i];
		else if (!strncmp(a, "--", 2) && !strncmp(a + 2, name, len) && a[2 + len] == '=')
			v = a + 3 + len;
		else
			rest[(*n)++] = argv[i];
	}
	rest[*n] = NULL;
	return v;
}
