/* Monotonic time in nanoseconds, for spins, back-offs and timeouts; wall
 * time for what must differ across restarts (and for status). */
#ifndef APUS_CLOCK_H
#define APUS_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "common/sys.h"	/* the real clock_gettime, not the shim's (preload/clock.c) */

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	sys.clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t realtime_ns(void)
{
	struct timespec ts;

	sys.clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t realtime_ms(void)
{
	return realtime_ns() / 1000000;
}

#endif
