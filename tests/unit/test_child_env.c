/* The environment of leader_hook and snapshot_cmd (coordinator/node/child_env.c)
 * is the one the server started with, copied before its main ran: Redis
 * rewrites environ (clearenv, then setenv of every variable) while our
 * threads run, and a hook that read environ then crashed the server with
 * SIGSEGV (CI, failover.bats' leader_hook test, a node's restart). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/node/child_env.h"
#include "tests/unit/unit.h"

static int done;	/* set by main once it stops rewriting environ */

static const char *find(char **env, const char *name_eq)
{
	for (; *env; env++)
		if (!strncmp(*env, name_eq, strlen(name_eq)))
			return *env + strlen(name_eq);
	return NULL;
}

/* What the hook and the snapshot thread do, over and over, while the main
 * thread rewrites environ as Redis's setproctitle does. */
static void *builder(void *arg)
{
	char *env[1024], *extra[] = { "APUS_VIEW=9", "KEEP=replaced", NULL };
	long *bad = arg;

	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		if (child_env_build(env, 1024, NULL) < 0 || !find(env, "KEEP=") ||
		    strcmp(find(env, "KEEP="), "started"))
			(*bad)++;
		if (child_env_build(env, 1024, extra) < 0 || strcmp(find(env, "KEEP="), "replaced") ||
		    strcmp(find(env, "APUS_VIEW="), "9"))
			(*bad)++;
	}
	return NULL;
}

int main(void)
{
	char *env[1024], *two[3];
	pthread_t t;
	long bad = 0;

	setenv("KEEP", "started", 1);
	setenv("LD_PRELOAD", "/nonexistent/libapus.so", 1);
	setenv("APUS_NODE", "1", 1);
	setenv("APUS_CONFIG", "/etc/apus/x.conf", 1);
	CHECK(child_env_capture() == 0, "capture");

	CHECK(child_env_build(env, 1024, NULL) > 0, "build");
	CHECK(!find(env, "LD_PRELOAD="), "a child must not load the shim");
	CHECK(!find(env, "APUS_NODE="), "a child must not claim the node");
	CHECK(find(env, "APUS_CONFIG=") && !strcmp(find(env, "APUS_CONFIG="), "/etc/apus/x.conf"),
	      "APUS_CONFIG is kept");
	CHECK(child_env_build(two, 1, NULL) == -1, "a short array is refused");

	CHECK(pthread_create(&t, NULL, builder, &bad) == 0, "thread");
	for (int round = 0; round < 2000; round++) {
		char name[32];

		clearenv();
		setenv("KEEP", "rewritten", 1);
		for (int i = 0; i < 50; i++) {
			snprintf(name, sizeof(name), "FILLER_%d", i);
			setenv(name, "x", 1);	/* moves environ's array as it grows */
		}
	}
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	CHECK(bad == 0, "%ld builds saw a changed environment", bad);
	CHECK(child_env_capture() == 0, "a second capture is a no-op");
	CHECK(child_env_build(env, 1024, NULL) > 0 && !strcmp(find(env, "KEEP="), "started"),
	      "the copy is the first one");
	return 0;
}
