/* Replays a fuzz target's inputs without libFuzzer: every file in the
 * directories given, or else in tests/fuzz/corpus/<target> and
 * tests/fuzz/regress/<target>, found from the working directory or above
 * the binary (build/tests/unit/, build/tsan/tests/unit/).  A crash or a
 * broken invariant aborts; no input at all is a failure too. */
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#ifndef FUZZ_TARGET
#error "build with -DFUZZ_TARGET=\"name\""
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a target: called once before the inputs, as libFuzzer does. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A sanitizer's report fails the replay, whatever the environment says:
 * UBSan would go on after one by default. */
__attribute__((visibility("default"), used)) const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1";
}

static int replay_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	FILE *f = fopen(path, "rb");

	if (!f || fstat(fileno(f), &st) < 0) {
		perror(path);
		exit(1);
	}
	/* Exactly the input's size: ASan sees a read one byte past it. */
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		perror(path);
		exit(1);
	}
	fclose(f);
	fprintf(stderr, "replay %s\n", path);
	LLVMFuzzerTestOneInput(buf, (size_t)st.st_size);
	free(buf);
	return 1;
}

/* Replays every plain file of DIR (dot files, such as .keep, aside). */
static int replay_dir(const char *dir)
{
	struct dirent **names;
	char path[PATH_MAX];
	int n = scandir(dir, &names, NULL, alphasort), done = 0;

	if (n < 0) {
		perror(dir);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (names[i]->d_name[0] != '.' && !stat(path, &st) && S_ISREG(st.st_mode))
			done += replay_file(path);
		free(names[i]);
	}
	free(names);
	return done;
}

/* The tree's tests/fuzz: from the working directory, else from the
 * directories above this binary. */
static int find_root(char *root, size_t len)
{
	char exe[PATH_MAX], probe[PATH_MAX + 64];
	ssize_t n;

	if (!access("tests/fuzz/corpus/" FUZZ_TARGET, R_OK)) {
		snprintf(root, len, "tests/fuzz");
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	for (char *slash; (slash = strrchr(exe, '/')) && slash != exe;) {
		*slash = '\0';
		snprintf(probe, sizeof(probe), "%s/tests/fuzz/corpus/" FUZZ_TARGET, exe);
		if (!access(probe, R_OK)) {
			int n = snprintf(root, len, "%s/tests/fuzz", exe);
			return n < 0 || (size_t)n >= len ? -1 : 0;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	char root[PATH_MAX], dir[PATH_MAX + 64];
	int done = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			struct stat st;
			if (!stat(argv[i], &st) && S_ISDIR(st.st_mode))
				done += replay_dir(argv[i]);
			else
				done += replay_file(argv[i]);
		}
	} else {
		if (find_root(root, sizeof(root))) {
			fprintf(stderr, "no tests/fuzz/corpus/%s here or above the binary\n",
				FUZZ_TARGET);
			return 1;
		}
		snprintf(dir, sizeof(dir), "%s/corpus/%s", root, FUZZ_TARGET);
		done += replay_dir(dir);
		snprintf(dir, sizeof(dir), "%s/regress/%s", root, FUZZ_TARGET);
		done += replay_dir(dir);
	}
	if (!done) {
		fprintf(stderr, "%s: no inputs replayed\n", FUZZ_TARGET);
		return 1;
	}
	printf("%s: %d inputs replayed\n", FUZZ_TARGET, done);
	return 0;
}
