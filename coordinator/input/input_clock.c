/* Time as an input of the log: the thread's window and the stamps'
 * expansion (input_clock.h). */
#include "coordinator/input/input_clock.h"

#include "common/clock.h"

__thread uint64_t input_clock_ms;

uint64_t input_clock_expand(uint32_t low)
{
	const uint64_t span = 1ULL << 32;
	uint64_t now, at;

	if (!low)
		return 0;
	now = realtime_ms();	/* through sys: the machine's clock, in a window too */
	at = (now & ~(span - 1)) | low;
	/* The candidate nearest to our own clock. */
	if (at > now && at - now > span / 2 && at >= span)
		at -= span;
	else if (at < now && now - at > span / 2)
		at += span;
	return at;
}
