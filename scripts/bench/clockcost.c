/* What a server's clock read costs: ns per call of clock_gettime
 * (CLOCK_REALTIME and CLOCK_MONOTONIC), gettimeofday and time, N calls
 * each, best of ROUNDS.  scripts/clock-bench.sh runs it bare and under
 * LD_PRELOAD=libapus.so (the wrappers of preload/clock.c) side by side.
 *
 *   clockcost [N] [ROUNDS]      default 20000000 calls, 5 rounds */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

static double per_call(int which, long n)
{
	struct timespec ts;
	struct timeval tv;
	uint64_t t0 = mono_ns();

	for (long i = 0; i < n; i++) {
		switch (which) {
		case 0:
			clock_gettime(CLOCK_REALTIME, &ts);
			sink += (uint64_t)ts.tv_nsec;
			break;
		case 1:
			clock_gettime(CLOCK_MONOTONIC, &ts);
			sink += (uint64_t)ts.tv_nsec;
			break;
		case 2:
			gettimeofday(&tv, NULL);
			sink += (uint64_t)tv.tv_usec;
			break;
		default:
			sink += (uint64_t)time(NULL);
		}
	}
	return (double)(mono_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "clock_gettime(REALTIME)", "clock_gettime(MONOTONIC)",
					     "gettimeofday", "time" };
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;

	if (n <= 0 || rounds <= 0) {
		fprintf(stderr, "usage: clockcost [N] [ROUNDS]\n");
		return 2;
	}
	for (int w = 0; w < 4; w++) {
		double best = 1e30;
		for (int r = 0; r < rounds; r++) {
			double v = per_call(w, n);
			if (v < best)
				best = v;
		}
		printf("%-26s %6.1f ns\n", names[w], best);
	}
	return 0;
}
