/* Removes a test's directory and the memory files its nodes' regions live
 * in (<data_dir>/apus.region links to them: region.h). */
#ifndef APUS_TEST_TESTDIR_H
#define APUS_TEST_TESTDIR_H

#include <stdio.h>
#include <stdlib.h>

static inline int testdir_remove(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd),
		 "find %s -name apus.region -type l -exec sh -c 'rm -f \"$(readlink \"$1\")\"' _ {} \\; "
		 "; rm -rf %s", dir, dir);
	return system(cmd);
}

/* Writes TEXT to the file NAME in DIR; 0, or -1 with errno. */
static inline int testdir_put(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "w")))
		return -1;
	fputs(text, f);
	return fclose(f);
}

#endif
