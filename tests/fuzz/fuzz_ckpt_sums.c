/* Arbitrary bytes as one line of a checkpoint's SHA256SUMS, parsed by
 * ckpt_sums_line as ckpt_verify (apus restore) does before it hashes the
 * file the line names.  Invariants: a line accepted names a non-empty
 * path inside the line, after 64 characters and a space, that stays
 * inside the checkpoint (relative, no ".." component). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guard/checkpoint.h"
#include "tests/fuzz/fuzz.h"

static int leaves(const char *path)
{
	if (path[0] == '/')
		return 1;
	for (const char *p = path; p; p = strchr(p, '/')) {
		if (*p == '/')
			p++;
		if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
			return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* ckpt_verify reads lines with fgets: NUL-ended, one newline at most. */
	char *line = malloc(size + 1);
	const char *name = NULL;

	FUZZ_CHECK(line);
	memcpy(line, data, size);
	line[size] = '\0';
	if (!ckpt_sums_line(line, &name)) {
		FUZZ_CHECK(name >= line + 66 && name < line + size && *name);
		FUZZ_CHECK(line[64] == ' ' && strlen(line) == (size_t)(name - line) + strlen(name));
		FUZZ_CHECK(!strchr(line, '\n'));
		FUZZ_CHECK(!leaves(name));
	}
	free(line);
	return 0;
}
