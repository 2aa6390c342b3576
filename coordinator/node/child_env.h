/* The environment of the commands a node runs (leader_hook, snapshot_cmd).
 *
 * It is copied once, when the node starts inside the server's constructor,
 * and never read from environ again: servers rewrite their own environment
 * while our threads run (Redis's setproctitle moves every variable with
 * clearenv and setenv at the top of main), and reading environ then is a
 * use after free. */
#ifndef APUS_CHILD_ENV_H
#define APUS_CHILD_ENV_H

#include <stddef.h>

/* Set, to the node's id, in the environment of the commands a node runs for
 * its recovery points (snapshot_cmd, snapshot_load_cmd), beside
 * APUS_CONFIG: they run in a session of their own, so when their server
 * dies (kill -9, apus stop) nothing else ties them to the node, and one
 * left running would act on the node's next server (a snapshot.py that
 * connects to the fresh, still empty server and renames its empty dump
 * over the file that server is about to load; a load.py that loads an old
 * file into a server that already executes the log).  apus stop and
 * whatever brings the node back find them by it and end them
 * (guard/owner.h, node_processes). */
#define CHILD_ENV_NODE "APUS_SNAPSHOT_NODE"

/* Copies environ, less the variables that would make a child a replica
 * (LD_PRELOAD, APUS_NODE).  Only the first call copies; 0 or -1 (ENOMEM). */
int child_env_capture(void);

/* Fills ENV (CAP slots, NULL-terminated) with the copy, each variable named
 * in EXTRA (a NULL-terminated list of "NAME=value") replacing the copy's.
 * Points into the copy and EXTRA.  Returns the count, or -1 if CAP is short. */
int child_env_build(char **env, size_t cap, char *const *extra);

#endif
