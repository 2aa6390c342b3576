/* Helpers for the fuzz targets (tests/fuzz/fuzz_*.c): built with libFuzzer
 * by `make fuzz`, and with replay.c as unit tests that replay the corpus
 * and the regression inputs. */
#ifndef APUS_FUZZ_H
#define APUS_FUZZ_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant of the decoder under test: abort, which both libFuzzer and
 * the replay count as a crash. */
#define FUZZ_CHECK(cond)                                                               \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,     \
				__LINE__, #cond);                                      \
			abort();                                                       \
		}                                                                      \
	} while (0)

static char fuzz_dir[64] __attribute__((unused));

static inline void fuzz_dir_remove(void)
{
	char cmd[96];

	/* Only our own mkdtemp directory, which holds files we named. */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fuzz_dir);
	if (fuzz_dir[0])
		(void)!system(cmd);
}

/* A private directory for the inputs that a decoder reads from a file,
 * made once per process and removed at exit. */
static inline const char *fuzz_tmpdir(void)
{
	if (!fuzz_dir[0]) {
		const char *t = getenv("TMPDIR");

		/* A memory file system where there is one: a file per run. */
		if (!t || !*t)
			t = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
		snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/apus-fuzz.XXXXXX", t);
		if (!mkdtemp(fuzz_dir)) {
			perror("mkdtemp");
			abort();
		}
		atexit(fuzz_dir_remove);
	}
	return fuzz_dir;
}

/* Writes DATA into NAME in the private directory with MODE; its path. */
static inline const char *fuzz_file(const char *name, const void *data, size_t size, mode_t mode)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fuzz_tmpdir(), name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0 || fchmod(fd, mode) || (size && write(fd, data, size) != (ssize_t)size)) {
		perror(path);
		abort();
	}
	close(fd);
	return path;
}

#endif
