/* The server's random numbers (coordinator/input_random.h): inside the
 * window of a logged input, rand(), random(), getrandom(), getentropy()
 * and reads of /dev/urandom and /dev/random opened with fopen() give the
 * entry's numbers, on every replica; outside, the devices and getrandom()
 * give the boot stream and rand()/random() are libc's.  With randomness =
 * machine, in a forked child, or before the node runs, all are libc's.
 *
 * Not covered (doc/limits.md): open()+read() of the devices, the *rand48
 * and arc4random families, rand_r (its state is the caller's), RDRAND. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../coordinator/input_clock.h"
#include "../coordinator/input_random.h"
#include "shim.h"

/* Whether this call's numbers come from the log. */
static int from_log(void)
{
	return __atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&shim_mode, __ATOMIC_RELAXED) == MODE_ACTIVE && input_random_on();
}

/* In a window, as libc's would: 0 .. RAND_MAX (2^31 - 1). */
static int in_window(void)
{
	return input_clock_ms && from_log();
}

APUS_EXPORT int rand(void)
{
	if (in_window())
		return (int)(input_random_next() >> 33);
	real_resolve();
	return real.rand();
}

APUS_EXPORT long random(void)
{
	if (in_window())
		return (long)(input_random_next() >> 33);
	real_resolve();
	return real.random();
}

APUS_EXPORT ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
	if (from_log()) {
		input_random_fill(buf, len);
		return (ssize_t)len;
	}
	real_resolve();
	return real.getrandom(buf, len, flags);
}

APUS_EXPORT int getentropy(void *buf, size_t len)
{
	if (from_log()) {
		if (len > 256) {
			errno = EIO;	/* as libc's: at most 256 bytes */
			return -1;
		}
		input_random_fill(buf, len);
		return 0;
	}
	real_resolve();
	return real.getentropy(buf, len);
}

static ssize_t device_read(void *cookie, char *buf, size_t len)
{
	(void)cookie;
	input_random_fill(buf, len);
	return (ssize_t)len;
}

static int device_close(void *cookie)
{
	(void)cookie;
	return 0;
}

/* A read-only stream of /dev/urandom or /dev/random, or NULL: PATH with
 * MODE is another file. */
static FILE *device_stream(const char *path, const char *mode)
{
	static const cookie_io_functions_t io = { .read = device_read, .close = device_close };
	FILE *f;

	if (!path || !mode || mode[0] != 'r' || strchr(mode, '+') ||
	    (strcmp(path, "/dev/urandom") && strcmp(path, "/dev/random")) || !from_log())
		return NULL;
	f = fopencookie(NULL, mode, io);
	/* Unbuffered: each read draws where it is made, in its own window. */
	if (f)
		setvbuf(f, NULL, _IONBF, 0);
	return f;
}

APUS_EXPORT FILE *fopen(const char *path, const char *mode)
{
	FILE *f = device_stream(path, mode);

	real_resolve();
	return f ? f : real.fopen(path, mode);
}

APUS_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	FILE *f = device_stream(path, mode);

	real_resolve();
	return f ? f : real.fopen64(path, mode);
}
