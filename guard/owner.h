/* One owner per node.  apus start, restore, rebuild and stop, and the
 * node's guard, each act on a node only while they hold its owner lock:
 * flock(2) on <run_dir>/apus.owner.lock, which names the holder ("PID WHAT") so
 * that whoever finds it taken can say who acts.  The kernel drops the lock
 * with its holder, so a crashed holder never leaves the node locked.
 *
 * A node's server is the process that holds <data_dir>/apus.lock (the
 * shim takes it for the life of the process; CRIU restores it with the
 * process, whoever restored it).  A node's processes are those that have
 * that file open (the server and what it forked) or whose environment
 * names the node (APUS_CONFIG and APUS_NODE, set by host_spawn_node: what
 * it ran and its children, for servers that keep their environment; or
 * APUS_CONFIG and CHILD_ENV_NODE, set by the node for its snapshot_cmd and
 * snapshot_load_cmd: coordinator/node/child_env.h). */
#ifndef APUS_OWNER_H
#define APUS_OWNER_H

#include <stddef.h>
#include <sys/types.h>

#include "common/config.h"

#define OWNER_LOCK_FILE "apus.owner.lock"
#define GUARD_LOCK_FILE "apus.guard.lock"

/* Exit status of a command that found the node owned or running already,
 * and so did nothing (restore, rebuild, guard). */
#define EXIT_OWNED 3

/* Takes NODE's lock FILE (OWNER_LOCK_FILE or GUARD_LOCK_FILE) for WHAT
 * (e.g. "apus restore"), waiting up to WAIT_MS for its holder.  Returns
 * the lock's fd (>= 0); -1 when another holds it still, with HOLDER set to
 * "WHAT (pid P)"; -2 on an error, with HOLDER set to why. *WAITED (may be
 * NULL) says whether it found the lock taken at first. */
int owner_lock(const struct apus_config *cfg, int node, const char *file, const char *what,
	       int wait_ms, int *waited, char *holder, size_t len);
void owner_unlock(int fd);

/* Whether someone holds NODE's owner lock, as its text says (without
 * taking it): 1 with OUT = "WHAT (pid P)", else 0. */
int owner_acting(const struct apus_config *cfg, int node, char *out, size_t len);

/* Every live process of NODE (see above), this one excepted: up to MAX
 * pids in OUT; returns how many there are. */
int node_processes(const struct apus_config *cfg, int node, pid_t *out, int max);

/* Ends what NODE's dead server left running, before anything starts or
 * restores it: SIGKILL to each of the node's processes, then waits up to
 * WAIT_MS for them to be gone.  Such a leftover is a snapshot child (Redis's
 * BGSAVE child renames its file over the one the next server loads: that
 * server would start from a state no log entry names), a snapshot_cmd or
 * snapshot_load_cmd the dead server ran (memcached's snapshot.py would
 * dump the next server, still empty, over the file it loads; load.py would
 * load an old file into it once it executes the log), or a process that
 * keeps the dead server's pid taken as its session id (a CRIU restore needs
 * that pid back).  They are the node's processes (above) and the members
 * of the session of the server its pid file names, once that one is dead,
 * that work in the node's data directory.
 * Call only once the node's server is known dead.  Returns how many are
 * left. */
#define LEFTOVER_WAIT_MS 5000
int node_end_leftovers(const struct apus_config *cfg, int node, int wait_ms);

/* Whether PID is one of NODE's processes (a recorded pid may have been
 * reused by another process since). */
int node_owns_pid(const struct apus_config *cfg, int node, pid_t pid);

/* PID's parent, or 0 when it is gone. */
pid_t process_parent(pid_t pid);

/* NODE's server: the pid its pid file records if that one lives (and
 * holds the server lock, or nobody does yet), else the lock's holder, else 0.
 * *ADOPTED (may be NULL) is set when it was not the recorded one. */
pid_t node_server(const struct apus_config *cfg, int node, int *adopted);

/* The last line of NODE's guard log (apus.guard.log), for messages. */
void guard_last_line(const struct apus_config *cfg, int node, char *out, size_t len);

#endif
