#define LOG_PREFIX "hook: "
#include "coordinator/node/hook.h"

#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "coordinator/node/child_env.h"
#include "common/logger.h"
#include "coordinator/node/node_internal.h"
#include "common/sys.h"

/* Reaps the hook so it leaves no zombie.  The server may reap it first
 * (Redis waits for any child): then there is nothing left to do. */
static void *reaper(void *arg)
{
	pid_t pid = (pid_t)(intptr_t)arg;
	int st;

	if (sys.wait4(pid, &st, 0, NULL) == pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		pr_warn("leader_hook (pid %d) failed (%s %d)", (int)pid,
			WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return NULL;
}

void hook_leader_change(struct node *n)
{
	char view[64], leader[32], config[PATH_MAX + 16];
	char *argv[] = { "sh", "-c", n->cfg.leader_hook, NULL };
	char *extra[] = { view, leader, config, NULL };
	char *env[1024];
	posix_spawn_file_actions_t fa;
	pthread_t t;
	pid_t pid;
	int rc;

	if (!n->cfg.leader_hook[0])
		return;
	snprintf(view, sizeof(view), "APUS_VIEW=%llu", (unsigned long long)n->view);
	snprintf(leader, sizeof(leader), "APUS_LEADER=%d", n->self);
	snprintf(config, sizeof(config), "APUS_CONFIG=%s", n->cfg.path);
	if (child_env_build(env, sizeof(env) / sizeof(env[0]), extra) < 0) {
		pr_err("the environment has more than %zu variables: leader_hook not run",
		       sizeof(env) / sizeof(env[0]) - 1);
		return;
	}
	/* The hook must hold none of the server's descriptors: a listening
	 * socket it kept (arping runs for seconds) would make a restart of
	 * this node fail to bind, a peer socket would hide this node's death. */
	rc = posix_spawn_file_actions_init(&fa);
	if (!rc) {
		rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
		if (!rc)
			rc = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, env);
		posix_spawn_file_actions_destroy(&fa);
	}
	if (rc) {
		pr_err("cannot run leader_hook: %s", strerror(rc));
		return;
	}
	pr_info("leader_hook started (pid %d) for view %llu", (int)pid, (unsigned long long)n->view);
	if (pthread_create(&t, NULL, reaper, (void *)(intptr_t)pid) == 0)
		pthread_detach(t);
}
