/* The nodes' processes on this host, for the guard and the apus CLI's
 * commands alike: whether a node lives here, its pids and pid files, its
 * network namespace, starting its server (spawn.c) and its guard,
 * stopping them (stop.c); and the small things they need (the clock,
 * mkdir -p, libapus.so, the cluster key).  host.c has the rest. */
#ifndef APUS_HOST_H
#define APUS_HOST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/config.h"

/* The guard's pid file in a node's run_dir. */
#define GUARD_PIDFILE "apus.guard.pid"

/* Prints one line "apus: ..." to stderr (the guard's: to its log). */
void host_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with a va_list (the CLI's cli_error prints through it). */
void host_verror(const char *fmt, va_list ap);

/* Whether NODE's address belongs to this host. */
int host_node_is_local(const struct apus_config *cfg, int node);

/* The pid recorded for NODE if that process is alive, else 0. */
pid_t host_node_pid(const struct apus_config *cfg, int node);
/* The same for pid file NAME in NODE's data_dir; and writing one. */
pid_t host_pidfile_pid(const struct apus_config *cfg, int node, const char *name);
void host_write_pidfile(const struct apus_config *cfg, int node, const char *name, pid_t pid);

/* In a child about to exec: stdout and stderr append to LOG (NULL:
 * /dev/null), stdin from /dev/null. */
void host_redirect_stdio(const char *log);
int host_pid_alive(pid_t pid);

/* libapus.so: $APUS_LIB, or beside this program.  0, or -1 (said why). */
int host_find_lib(char *out, size_t len);

/* Forks node NODE's server under LIB (its own session, logging to
 * <data_dir>/apus.log, pid in <data_dir>/apus.pid); returns its pid or -1. */
pid_t host_spawn_node(const struct apus_config *cfg, int node, const char *lib);

/* CLOCK_MONOTONIC in ms; and a sleep. */
uint64_t host_mono_ms(void);
void host_sleep_ms(int ms);

/* mkdir -p PATH: 0 or -1 with errno set. */
int host_mkdirs(const char *path);

/* Whether NODE's server PID (just spawned) is ready: 1 ready (listening,
 * and its leader reached a majority), 0 not yet, -1 it failed (ERR says). */
int host_node_ready(const struct apus_config *cfg, int node, pid_t pid, char *err, size_t len);

/* The cluster key of NODE for a network transport, generated (0600) when
 * missing: 0, or -1 (said why). */
int host_ensure_key(const struct apus_config *cfg, int node);

/* Starts NODE's guard (apus guard) in its own session, unless one runs. */
void host_start_guard(const struct apus_config *cfg, int node);

/* The node's guard (guard/guard.c), if one runs: its pid, else 0. */
pid_t host_guard_pid(const struct apus_config *cfg, int node);

/* Enters the network namespace NAME (as ip netns exec does): 0 or -1. */
int host_enter_netns(const char *name);

/* Stops the nodes marked in WHICH (apus stop, the guard's --service;
 * guard/stop.c), their guards too unless WITH_GUARDS is 0.  0, or 1 when
 * a process survived. */
int host_stop_nodes(const struct apus_config *cfg, const int *which, int timeout_ms,
		    int with_guards);

#endif
