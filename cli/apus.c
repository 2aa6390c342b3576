/* apus: starts, stops and inspects the replicas of a cluster.  One file
 * per command (start.c, stop.c, status.c, ...); their options and errors
 * are cli.c's, what they do to a node's processes guard/host.h's. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The commands, in the order --help lists them. */
static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "start", cmd_start, "start the replicas of a cluster (all of this host's, or --node N)" },
	{ "stop", cmd_stop, "stop them" },
	{ "status", cmd_status, "show view, leader, and each node's role, commit and applied index" },
	{ "divergence", cmd_divergence, "where a replica's output differed from the leader's" },
	{ "verify", cmd_verify, "check that all replicas answer a read-only sweep alike" },
	{ "checkpoint", cmd_checkpoint, "checkpoint a backup now (CRIU)" },
	{ "checkpoints", cmd_checkpoints, "list a node's checkpoints" },
	{ "restore", cmd_restore, "bring a stopped node back from a checkpoint" },
	{ "rebuild", cmd_rebuild,
	  "rebuild a node from a live peer's snapshot (disk lost, or too far behind)" },
	{ "replace", cmd_replace, "replace a node (dead, or to retire) by a new one, while serving" },
	{ "add", cmd_add, "add a node to the cluster, while serving" },
	{ "remove", cmd_remove, "remove a node from the cluster, while serving" },
	{ "guard", cmd_guard, "supervise a node: checkpoints, restore on a crash (apus start runs it)" },
};

static void usage(FILE *out)
{
	fputs("usage: apus <command> [options]\n"
	      "\n"
	      "Transparent replication of an unmodified TCP server (Redis, ...).\n"
	      "\n"
	      "commands:\n", out);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-11s  %s\n", commands[i].name, commands[i].summary);
	fputs("\nRun 'apus <command> --help' for the options of a command.\n", out);
}

int main(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');

	if (!strcmp(base ? base + 1 : argv[0], "apus-guard"))
		return cmd_guard(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	cli_error("unknown command '%s' (see 'apus --help')", argv[1]);
	return 2;
}
