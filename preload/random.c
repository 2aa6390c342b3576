/* The server's random numbers (coordinator/input/input_random.h): inside the
 * window of a logged input, rand(), random(), getrandom(), getentropy()
 * drand48(), lrand48(), mrand48(), erand48(), nrand48(), jrand48(),
 * rand_r(), the arc4random family, and reads of
 * /dev/urandom and /dev/random (opened with fopen(), or with open() and
 * read with read()) give the entry's numbers, on every replica; outside,
 * the devices, getrandom() and arc4random give the boot stream and the
 * rest are libc's.  With randomness = machine, in a forked child, or
 * before the node runs, all are libc's.
 *
 * Not covered (doc/limits.md): a device fd read with pread(), or
 * duplicated (dup()) and read through the copy; RDRAND. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "coordinator/input/input_clock.h"
#include "coordinator/input/input_random.h"
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

/* The rand48 family's outputs: [0, 1) with 48 bits, [0, 2^31), and
 * [-2^31, 2^31). */
APUS_EXPORT double drand48(void)
{
	if (in_window())
		return (double)(input_random_next() >> 16) * 0x1p-48;
	real_resolve();
	return real.drand48();
}

APUS_EXPORT long lrand48(void)
{
	if (in_window())
		return (long)(input_random_next() >> 33);
	real_resolve();
	return real.lrand48();
}

APUS_EXPORT long mrand48(void)
{
	if (in_window())
		return (long)(int32_t)(uint32_t)(input_random_next() >> 32);
	real_resolve();
	return real.mrand48();
}

/* erand48(), nrand48(), jrand48() and rand_r() keep their state in the
 * caller's memory, seeded as the caller likes (libuuid: from its pid and
 * the clock).  In a window they give the entry's numbers and leave the
 * state set from them, so that what the caller draws next, in a window or
 * not, is the same on every replica too. */
static uint64_t rand48_next(unsigned short x[3])
{
	uint64_t v = input_random_next();

	x[0] = (unsigned short)(v >> 16);
	x[1] = (unsigned short)(v >> 32);
	x[2] = (unsigned short)(v >> 48);
	return v;
}

APUS_EXPORT double erand48(unsigned short x[3])
{
	if (in_window())
		return (double)(rand48_next(x) >> 16) * 0x1p-48;
	real_resolve();
	return real.erand48(x);
}

APUS_EXPORT long nrand48(unsigned short x[3])
{
	if (in_window())
		return (long)(rand48_next(x) >> 33);
	real_resolve();
	return real.nrand48(x);
}

APUS_EXPORT long jrand48(unsigned short x[3])
{
	if (in_window())
		return (long)(int32_t)(uint32_t)(rand48_next(x) >> 32);
	real_resolve();
	return real.jrand48(x);
}

APUS_EXPORT int rand_r(unsigned int *seed)
{
	if (in_window()) {
		uint64_t v = input_random_next();

		*seed = (unsigned int)v;
		return (int)(v >> 33);
	}
	real_resolve();
	return real.rand_r(seed);
}

/* arc4random: a generator seeded by the kernel, so like getrandom(). */
APUS_EXPORT uint32_t arc4random(void)
{
	if (from_log())
		return (uint32_t)(input_random_next() >> 32);
	real_resolve();
	return real.arc4random();
}

APUS_EXPORT void arc4random_buf(void *buf, size_t len)
{
	if (from_log()) {
		input_random_fill(buf, len);
		return;
	}
	real_resolve();
	real.arc4random_buf(buf, len);
}

APUS_EXPORT uint32_t arc4random_uniform(uint32_t upper)
{
	uint32_t r, floor;

	if (!from_log()) {
		real_resolve();
		return real.arc4random_uniform(upper);
	}
	if (upper < 2)
		return 0;
	/* Uniform: draws below 2^32 mod UPPER would favour the low values. */
	floor = -upper % upper;
	do
		r = (uint32_t)(input_random_next() >> 32);
	while (r < floor);
	return r % upper;
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

/* --- open() and read() of the devices --- */

static int is_device_path(const char *path)
{
	return path && (!strcmp(path, "/dev/urandom") || !strcmp(path, "/dev/random"));
}

/* After an open() of PATH with FLAGS returned FD: a device opened to read
 * is marked for read(); any other file clears a mark its fd number kept
 * (a device fd closed by other means than close()). */
static int opened(int fd, const char *path, int flags)
{
	struct fd_slot *s;

	if (fd < 0 || !shim_enter())
		return fd;
	if (is_device_path(path) && (flags & O_ACCMODE) == O_RDONLY) {
		if ((s = fd_slot_get(fd)))
			s->kind = FD_RANDOM_DEVICE;
	} else if ((s = fd_lookup(fd)) && s->kind == FD_RANDOM_DEVICE) {
		s->kind = FD_UNKNOWN;
	}
	return fd;
}

/* The mode argument open() takes with O_CREAT or O_TMPFILE. */
#define OPEN_MODE(flags, last)                                                    \
	mode_t mode = 0;                                                          \
	if ((flags) & O_CREAT || ((flags) & O_TMPFILE) == O_TMPFILE) {           \
		va_list ap;                                                       \
		va_start(ap, last);                                               \
		mode = va_arg(ap, mode_t);                                        \
		va_end(ap);                                                       \
	}

APUS_EXPORT int open(const char *path, int flags, ...)
{
	OPEN_MODE(flags, flags);
	real_resolve();
	return opened(real.open(path, flags, mode), path, flags);
}

APUS_EXPORT int open64(const char *path, int flags, ...)
{
	OPEN_MODE(flags, flags);
	real_resolve();
	return opened(real.open64(path, flags, mode), path, flags);
}

APUS_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags, flags);
	real_resolve();
	return opened(real.openat(dirfd, path, flags, mode), path, flags);
}

APUS_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags, flags);
	real_resolve();
	return opened(real.openat64(dirfd, path, flags, mode), path, flags);
}

APUS_EXPORT int __open_2(const char *path, int flags)
{
	real_resolve();
	return opened(real.__open_2(path, flags), path, flags);
}

APUS_EXPORT int __open64_2(const char *path, int flags)
{
	real_resolve();
	return opened(real.__open64_2(path, flags), path, flags);
}

/* Linux's fixed numbers: /dev/random is 1:8, /dev/urandom 1:9. */
static int is_device_fd(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
	       (minor(st.st_rdev) == 8 || minor(st.st_rdev) == 9);
}

/* A read of a marked device: in an input's window, the log's numbers. */
ssize_t random_fd_read(struct fd_slot *s, struct read_call *c)
{
	size_t total = iov_total(c->iov, c->iovcnt);

	if (c->family != CALL_READ && c->family != CALL_READV)
		return read_call_real(c, total);	/* recv*() of a device: the kernel's error */
	/* The mark is checked against the fd (it may have been closed by
	 * other means and its number reused): a stat per read of a device. */
	if (!is_device_fd(c->fd)) {
		s->kind = FD_UNKNOWN;
		return read_call_real(c, total);
	}
	if (!from_log())
		return read_call_real(c, total);
	for (int i = 0; i < c->iovcnt; i++)
		input_random_fill(c->iov[i].iov_base, c->iov[i].iov_len);
	return (ssize_t)total;
}
