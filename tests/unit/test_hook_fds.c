/* The leader_hook (coordinator/node/hook.c) gets APUS_VIEW, APUS_LEADER and
 * APUS_CONFIG, and none of the server's descriptors: a hook that outlives
 * the server (arping, in scripts/leader-hooks/vip.sh) must not keep its
 * listening socket, or the node's restart cannot bind. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/node/hook.h"
#include "coordinator/node/node_internal.h"
#include "tests/unit/unit.h"

int main(void)
{
	char dir[] = "/tmp/apus-test-hook.XXXXXX", out[128], got[PATH_MAX + 64] = "", want[PATH_MAX + 64];
	struct node *n = calloc(1, sizeof(*n));
	int fds[2], i;
	FILE *f;

	CHECK(n && mkdtemp(dir), "setup");
	CHECK(pipe(fds) == 0, "pipe");	/* inheritable, as a server's sockets may be */
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(n->cfg.path, sizeof(n->cfg.path), "%s/apus.conf", dir);
	/* [ is a builtin of sh: /proc/self/fd is the hook's own. */
	snprintf(n->cfg.leader_hook, sizeof(n->cfg.leader_hook),
		 "if [ -e /proc/self/fd/%d ] || [ -e /proc/self/fd/%d ]; then r=leaked; else r=closed; fi; "
		 "echo \"$r $APUS_VIEW $APUS_LEADER $APUS_CONFIG\" > %s.tmp && mv %s.tmp %s",
		 fds[0], fds[1], out, out, out);
	n->view = 7;
	n->self = 2;
	hook_leader_change(n);
	for (i = 0; i < 100 && access(out, F_OK); i++)
		usleep(50000);
	f = fopen(out, "r");
	CHECK(f, "the hook wrote nothing to %s in 5 s", out);
	CHECK(fgets(got, sizeof(got), f), "empty %s", out);
	fclose(f);
	got[strcspn(got, "\n")] = '\0';
	snprintf(want, sizeof(want), "closed 7 2 %s", n->cfg.path);
	CHECK(!strcmp(got, want), "hook saw '%s', want '%s'", got, want);
	unlink(out);
	rmdir(dir);
	free(n);
	return 0;
}
