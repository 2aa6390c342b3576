/* Adaptive spin-then-sleep, the idea of the kernel's haltpoll governor.
 * A sleeping thread costs a futex wake-up to reach, and on a virtual
 * machine whose idle vCPU halted that is 10-40 µs: more than a whole
 * request.  So a wait spins for a window first.  Work that comes back
 * within max_ns of the last grows the window to twice that gap, and a
 * steady stream (one client's requests, tens of µs apart) is caught
 * spinning; a gap longer than max_ns halves it back toward min_ns, so a
 * lightly loaded or idle node sleeps at once and burns nothing. */
#ifndef APUS_SPIN_H
#define APUS_SPIN_H

#include <stdint.h>

struct spin_window {
	uint64_t ns;		/* spin this long before sleeping */
	uint64_t min_ns, max_ns;
};

static inline void spin_window_init(struct spin_window *w, uint64_t min_ns, uint64_t max_ns)
{
	w->min_ns = min_ns;
	w->max_ns = max_ns > min_ns ? max_ns : min_ns;
	w->ns = min_ns;
}

/* Work came GAP_NS after the last (spinning or asleep meanwhile). */
static inline void spin_window_learn(struct spin_window *w, uint64_t gap_ns)
{
	if (gap_ns <= w->max_ns) {
		uint64_t want = 2 * gap_ns < w->max_ns ? 2 * gap_ns : w->max_ns;

		if (want > w->ns)
			w->ns = want;
	} else {
		w->ns = w->ns / 2 > w->min_ns ? w->ns / 2 : w->min_ns;
	}
}

#endif
