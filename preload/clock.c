/* The wall clock as the server reads it: inside the window of a logged
 * input (coordinator/input/input_clock.h) it says that input's stamp, the
 * leader's clock when it logged it, on every replica; elsewhere it is the
 * machine's.  Only the wall clock: CLOCK_MONOTONIC and the others pass
 * through, so the server's timers keep their pace.
 *
 * These run on every clock read of the server, on its hottest paths: no
 * lock, and no resolution of the real functions from here (the dynamic
 * linker may read the clock while `real` is being filled): a direct
 * system call until the shim's constructor filled it (real.c). */
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/input/input_clock.h"
#include "shim.h"

static int resolved(void)
{
	/* Pairs with the release store at the end of real.c's resolve(). */
	return __atomic_load_n(&real_resolved, __ATOMIC_ACQUIRE);
}

static int is_wall(clockid_t clk)
{
	return clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE;
}

APUS_EXPORT int clock_gettime(clockid_t clk, struct timespec *ts)
{
	uint64_t ms = input_clock_ms;

	if (ms && is_wall(clk)) {
		ts->tv_sec = (time_t)(ms / 1000);
		ts->tv_nsec = (long)(ms % 1000) * 1000000;
		return 0;
	}
	if (resolved())
		return real.clock_gettime(clk, ts);
	return (int)syscall(SYS_clock_gettime, clk, ts);
}

APUS_EXPORT int gettimeofday(struct timeval *tv, void *tz)
{
	uint64_t ms = input_clock_ms;

	if (ms) {
		tv->tv_sec = (time_t)(ms / 1000);
		tv->tv_usec = (suseconds_t)(ms % 1000) * 1000;
		if (!tz)
			return 0;
		/* The time zone, if asked for, is the machine's. */
		struct timeval ignored;
		return resolved() ? real.gettimeofday(&ignored, tz)
				  : (int)syscall(SYS_gettimeofday, &ignored, tz);
	}
	if (resolved())
		return real.gettimeofday(tv, tz);
	return (int)syscall(SYS_gettimeofday, tv, tz);
}

APUS_EXPORT time_t time(time_t *out)
{
	uint64_t ms = input_clock_ms;
	time_t t;

	if (!ms && resolved())
		return real.time(out);	/* libc's reads a cached second: ~2 ns */
	t = ms ? (time_t)(ms / 1000) : (time_t)syscall(SYS_time, NULL);
	if (out)
		*out = t;
	return t;
}
