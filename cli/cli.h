/* Shared by the apus CLI's commands (one file each; apus.c dispatches).
 * What they do to the nodes' processes on this host is guard/host.h's. */
#ifndef APUS_CLI_H
#define APUS_CLI_H

#include "common/config.h"

/* Options every command takes. */
struct cli {
	const char *config_path;
	int node;		/* -1: every node (of this host, for start/stop) */
	int json;
	int timeout_ms;
	const char *since;
	struct apus_config cfg;
};

/* Prints one line "apus: ..." to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses the common options of command CMD; prints USAGE for --help.
 * Returns 0 to go on, 1 when --help was printed, -1 on a usage error. */
int cli_parse(struct cli *c, const char *cmd, const char *usage, int argc, char **argv);

/* A command's own option, before cli_parse: takes --NAME V, --NAME=V or
 * -S V out of ARGV (the last one counts) and returns V or NULL; the other
 * arguments go to REST (NULL-terminated, at most 63), their count to *N. */
const char *cli_take_option(int argc, char **argv, const char *name, char shrt, char **rest,
			    int *n);

int cmd_start(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_divergence(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);
int cmd_checkpoints(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_rebuild(int argc, char **argv);
int cmd_guard(int argc, char **argv);
int cmd_replace(int argc, char **argv);
int cmd_add(int argc, char **argv);
int cmd_remove(int argc, char **argv);

#endif
