/* The server's waits for its children (coordinator/node/input_child.h): the
 * end of a child of the server (not the node's own snapshot) reaches it
 * where the leader's log says, on every replica.  Elsewhere (a forked
 * child, a node that is not running) they are libc's.  waitid() is not
 * covered (doc/limits.md). */
#include <sys/wait.h>

#include "coordinator/node/input_child.h"
#include "shim.h"

static int ordered(void)
{
	return shim_enter() && __atomic_load_n(&shim_mode, __ATOMIC_RELAXED) == MODE_ACTIVE &&
	       shim_node;
}

APUS_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	real_resolve();
	if (!ordered())
		return real.wait4(pid, status, options, ru);
	return input_child_wait(shim_node, pid, status, options, ru);
}

APUS_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	return wait4(pid, status, options, NULL);
}

APUS_EXPORT pid_t wait3(int *status, int options, struct rusage *ru)
{
	return wait4(-1, status, options, ru);
}

APUS_EXPORT pid_t wait(int *status)
{
	return wait4(-1, status, 0, NULL);
}
