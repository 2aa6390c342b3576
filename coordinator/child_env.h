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

/* Copies environ, less the variables that would make a child a replica
 * (LD_PRELOAD, APUS_NODE).  Only the first call copies; 0 or -1 (ENOMEM). */
int child_env_capture(void);

/* Fills ENV (CAP slots, NULL-terminated) with the copy, each variable named
 * in EXTRA (a NULL-terminated list of "NAME=value") replacing the copy's.
 * Points into the copy and EXTRA.  Returns the count, or -1 if CAP is short. */
int child_env_build(char **env, size_t cap, char *const *extra);

#endif
