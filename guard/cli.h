/* Shared by the apus CLI's commands. */
#ifndef APUS_CLI_H
#define APUS_CLI_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

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

/* Whether NODE's address belongs to this host. */
int cli_node_is_local(const struct apus_config *cfg, int node);

/* The pid recorded for NODE if that process is alive, else 0. */
pid_t cli_node_pid(const struct apus_config *cfg, int node);
/* The same for pid file NAME in NODE's data_dir; and writing one. */
pid_t cli_pidfile_pid(const struct apus_config *cfg, int node, const char *name);
void cli_write_pidfile(const struct apus_config *cfg, int node, const char *name, pid_t pid);

/* In a child about to exec: stdout and stderr append to LOG (NULL:
 * /dev/null), stdin from /dev/null. */
void cli_redirect_stdio(const char *log);
int cli_pid_alive(pid_t pid);

/* libapus.so: $APUS_LIB, or beside this program.  0, or -1 (said why). */
int cli_find_lib(char *out, size_t len);

/* Forks node NODE's server under LIB (its own session, logging to
 * <data_dir>/apus.log, pid in <data_dir>/apus.pid); returns its pid or -1. */
pid_t cli_spawn_node(const struct apus_config *cfg, int node, const char *lib);

/* CLOCK_MONOTONIC in ms; and a sleep. */
uint64_t cli_mono_ms(void);
void cli_sleep_ms(int ms);

/* mkdir -p PATH: 0 or -1 with errno set. */
int cli_mkdirs(const char *path);

/* Whether NODE's server PID (just spawned) is ready: 1 ready (listening,
 * and its leader reached a majority), 0 not yet, -1 it failed (ERR says). */
int cli_node_ready(const struct apus_config *cfg, int node, pid_t pid, char *err, size_t len);

/* The cluster key of NODE for a network transport, generated (0600) when
 * missing: 0, or -1 (said why). */
int cli_ensure_key(const struct apus_config *cfg, int node);

/* Starts NODE's guard (apus guard) in its own session, unless one runs. */
void cli_start_guard(const struct apus_config *cfg, int node);

/* The node's guard (guard/guard.c), if one runs: its pid, else 0. */
pid_t cli_guard_pid(const struct apus_config *cfg, int node);

/* Enters the network namespace NAME (as ip netns exec does): 0 or -1. */
int cli_enter_netns(const char *name);

/* Stops the nodes marked in WHICH (apus stop; guard/stop.c), their guards
 * too unless WITH_GUARDS is 0.  0, or 1 when a process survived. */
int cli_stop_nodes(const struct apus_config *cfg, const int *which, int timeout_ms,
		   int with_guards);

/* Exit status of a command that found the node owned or running already,
 * and so did nothing (restore, rebuild, guard). */
#define EXIT_OWNED 3

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
