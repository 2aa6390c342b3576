/* Background children as inputs of the log.  A server that forks a child
 * while it handles a client's input (Redis: BGSAVE, BGREWRITEAOF) learns
 * later, from waitpid() in its timers, that the child ended, and acts on
 * it (the save's time, the rewritten AOF, "already in progress").  When it
 * learns must be the leader's on every replica.
 *
 * Logged children.  A child forked in the window of entry F
 * (input_clock.h) is known by F on every replica.  Where the leader's
 * server learns its end by a poll (WNOHANG, or any wait outside a
 * window), the shim logs an ENTRY_CHILD entry naming F and returns the
 * end only once the entry is committed;
 * the server then handles it in that entry's window (its clock, its
 * random numbers).  A backup's server does not learn of its own child's
 * end before its replay reaches that entry: ends it reaps early are kept
 * here (the server is told the child still runs); at the entry, the
 * replay waits until every earlier turn is taken and the server's next
 * wait has returned the end: for as long as its own child still runs (up
 * to CHILD_RUN_MAX_NS: a backup's child may take longer than the
 * leader's), then up to CHILD_WAIT_NS for the server to ask.  A replica
 * that has no child F (it restarted from a recovery point taken after F,
 * or its fork failed) skips the entry.  A server that forked its twin in
 * another window (from its timers: Redis's cron starts a rewrite asked
 * while another child ran) has it taken as the twin when it is its only
 * child (one child at a time, as in Redis), waiting up to
 * CHILD_TWIN_WAIT_NS for its timers to fork it; with several children
 * at once, the end reaches that server only after CHILD_KEEP_NS
 * (doc/limits.md).
 *
 * A child forked outside any window (a server's timers between two
 * passes: Redis's save points) is known by the entry its thread handled
 * last, like one forked from a timer inside a window; the twin rule above
 * matches it.  A poll (WNOHANG) is ordered so wherever it is made: a
 * server's timers run in the window of whatever it read last in the same
 * pass of its loop.  Ends learned by a blocking wait inside a window
 * (while handling a request) and the node's own snapshots' children are
 * not logged: they pass through as before.
 *
 * A child's exit comes before its end is learned, and what the child did
 * (Redis's BGSAVE renames its dump.rdb into place) is visible to the
 * server from then on: a DEBUG RELOAD that saves dump.rdb and loads it
 * back loads the child's older file where the child renames it between
 * the two.  So the exit is an input too: before each input it logs, the
 * leader looks (waitid, WNOWAIT) whether a logged child has exited, and
 * logs an ENTRY_CHILD_EXIT naming F first; a backup's replay holds the
 * inputs after it until its own child F has exited (up to
 * CHILD_RUN_MAX_NS).  A backup's child that exits earlier than the
 * leader's is not held back: a race the leader's server has as well. */
#ifndef APUS_INPUT_CHILD_H
#define APUS_INPUT_CHILD_H

#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct node;

/* How long a backup's replay waits at an ENTRY_CHILD for its server to
 * ask for an end that is there (the child ended, or ended on the leader
 * and we reaped it). */
#define CHILD_WAIT_NS (2000ULL * 1000000)
/* How long it waits for its own child, still running, to end. */
#define CHILD_RUN_MAX_NS (300000ULL * 1000000)
/* How long it waits for a twin its timers have not forked yet. */
#define CHILD_TWIN_WAIT_NS (1000ULL * 1000000)
/* How long a backup keeps an end no entry of its log names. */
#define CHILD_KEEP_NS (30000ULL * 1000000)

/* The server forked PID in the window of entry FORKED_AT. */
void input_child_forked(pid_t pid, uint64_t forked_at);

/* Leader, before it logs an input: the F of up to MAX logged children
 * that have exited since it last looked, in AT (each is told once).
 * Costs nothing while no logged child runs. */
int input_child_exits(uint64_t *at, int max);

/* Backup's replay at the ENTRY_CHILD_EXIT IDX for the child forked at
 * FORKED_AT: 1 once ours has exited (or none is ours), 0 while it runs;
 * MAY_FORK as for input_child_due. */
int input_child_exit_due(uint64_t forked_at, uint64_t idx, uint64_t waited_ns, int may_fork);

/* The server waits for a child (wait4's arguments) on node N.  Returns as
 * wait4 does, with the logged children's ends in log order. */
pid_t input_child_wait(struct node *n, pid_t pid, int *status, int options, struct rusage *ru);

/* Backup's replay at the ENTRY_CHILD IDX (stamp STAMP) for the child
 * forked at FORKED_AT: 1 when the server has had the end (or this
 * replica has no such child), 0 while it waits; after the bounds above
 * the end goes to the server whenever it asks, and this returns 1.
 * MAY_FORK: our server's state began before FORKED_AT (so it may yet
 * fork the twin from its timers). */
int input_child_due(uint64_t forked_at, uint64_t idx, uint64_t stamp, uint64_t waited_ns,
		    int may_fork);

#endif
