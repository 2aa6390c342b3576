#include "coordinator/node/child_env.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static char **copy;
static int copy_rc = -1;
static pthread_once_t copy_once = PTHREAD_ONCE_INIT;

static int is_var(const char *entry, const char *name_eq)
{
	return !strncmp(entry, name_eq, strlen(name_eq));
}

/* Length of "NAME=" in ENTRY (the whole entry if it has no '='). */
static size_t name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');

	return eq ? (size_t)(eq - entry) + 1 : strlen(entry);
}

static void copy_environ(void)
{
	size_t cnt = 0, k = 0;

	while (environ && environ[cnt])
		cnt++;
	copy = calloc(cnt + 1, sizeof(*copy));
	if (!copy)
		return;
	for (size_t i = 0; i < cnt; i++) {
		if (is_var(environ[i], "LD_PRELOAD=") || is_var(environ[i], "APUS_NODE="))
			continue;	/* a child is no replica */
		copy[k] = strdup(environ[i]);
		if (!copy[k])
			return;	/* copy_rc stays -1; what was copied is kept */
		k++;
	}
	copy_rc = 0;
}

int child_env_capture(void)
{
	pthread_once(&copy_once, copy_environ);
	if (copy_rc)
		errno = ENOMEM;
	return copy_rc;
}

static int named_in(const char *entry, char *const *extra)
{
	size_t len = name_len(entry);

	for (; extra && *extra; extra++)
		if (name_len(*extra) == len && !strncmp(*extra, entry, len))
			return 1;
	return 0;
}

int child_env_build(char **env, size_t cap, char *const *extra)
{
	size_t k = 0;

	child_env_capture();	/* a no-op after the node's start */
	for (char **e = copy; e && *e; e++) {
		if (named_in(*e, extra))
			continue;
		if (k + 1 >= cap)
			return -1;
		env[k++] = *e;
	}
	for (; extra && *extra; extra++) {
		if (k + 1 >= cap)
			return -1;
		env[k++] = *extra;
	}
	env[k] = NULL;
	return (int)k;
}
