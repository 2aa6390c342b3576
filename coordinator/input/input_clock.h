/* Time as an input of the log.  A server that reads the wall clock while
 * it handles a client's input (Redis: XADD's auto IDs, TIME in a script,
 * the deadline of SET ... EX or EXPIRE) must read the same on every
 * replica: the leader's clock when it logged that input.
 *
 * Stamps.  The leader stamps every entry with its input clock: its
 * CLOCK_REALTIME in ms, but never below the last stamp it made or
 * executed, so stamps never go back along the log, across failovers and
 * restarts too (a node executes its log before it leads).  The entry keeps
 * the stamp's low 32 bits (entry.h); a reader expands them against its own
 * clock, which is right while the two clocks are within 24 days.
 *
 * The window.  From a read that returns logged input to a server thread
 * (leader: bytes it just logged, or read ahead and logged; backup: a
 * replay turn), until that thread next waits for events (epoll_wait), its
 * CLOCK_REALTIME, gettimeofday() and time() say the entry's stamp
 * (preload/clock.c).  Outside (timers, the server's cron) the clock is the
 * machine's, as before: what a server does there is not replayed anyway.
 * Exact when each read returns one entry's bytes, as in-place replay and
 * read-ahead do; doc/limits.md says what is left.
 *
 * The same window carries the entry's index, the key of the random numbers
 * the thread draws in it (input_random.h). */
#ifndef APUS_INPUT_CLOCK_H
#define APUS_INPUT_CLOCK_H

#include <stdint.h>

#include "coordinator/input/input_random.h"

/* The stamp (ms) of the input the calling thread handles; 0: none. */
extern __thread uint64_t input_clock_ms;
/* The index of the entry whose window the thread opened last. */
extern __thread uint64_t input_entry;

/* The calling thread handles the bytes of entry IDX, stamped STAMP_MS.
 * Opened again for the same entry (its bytes read in parts), its random
 * draws go on where they were. */
static inline void input_window_enter(uint64_t stamp_ms, uint64_t idx)
{
	input_clock_ms = stamp_ms;
	if (idx != input_entry)
		input_random_enter(idx);
}

static inline void input_window_leave(void)
{
	input_clock_ms = 0;
	if (input_random_window)
		input_random_leave();
}

/* The full stamp whose low 32 bits are LOW (0: unknown, stays 0). */
uint64_t input_clock_expand(uint32_t low);

#endif
