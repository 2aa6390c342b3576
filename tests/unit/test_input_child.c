/* A child's exit as an input (coordinator/node/input_child.h), with real
 * children.  Leader: input_child_exits() names no child while it runs,
 * names it once it has exited (a zombie: not reaped yet), and only once.
 * Backup: input_child_exit_due() holds the replay while its own child
 * runs, lets it go once the child has exited, lets it go at once for a
 * child it will never have, and waits the twin's time for one its timers
 * may yet fork. */
#include <sys/wait.h>
#include <unistd.h>

#include "coordinator/node/input_child.h"
#include "tests/unit/unit.h"

/* A child that runs until it reads a byte on its pipe (or the pipe ends). */
static pid_t start_child(int *release)
{
	int p[2];

	CHECK(pipe(p) == 0, "pipe");
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (!pid) {
		char c;
		close(p[1]);
		(void)!read(p[0], &c, 1);
		_exit(0);
	}
	close(p[0]);
	*release = p[1];
	return pid;
}

/* Ends the child and waits until it is a zombie (exited, not reaped). */
static void end_child(pid_t pid, int release)
{
	siginfo_t si = { 0 };

	close(release);
	CHECK(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) == 0 && si.si_pid == pid,
	      "the child did not exit");
}

int main(void)
{
	uint64_t at[8];
	int release;

	/* Leader: nothing to look at costs nothing and names nothing. */
	CHECK(input_child_exits(at, 8) == 0, "exits named with no child");

	pid_t pid = start_child(&release);
	input_child_forked(pid, 100);
	CHECK(input_child_exits(at, 8) == 0, "a running child was named as exited");
	end_child(pid, release);
	CHECK(input_child_exits(at, 8) == 1 && at[0] == 100, "the exited child was not named");
	CHECK(input_child_exits(at, 8) == 0, "the exited child was named twice");
	CHECK(waitpid(pid, NULL, 0) == pid, "reap");

	/* Backup: the replay stands at ENTRY_CHILD_EXIT 201 for child 200. */
	pid = start_child(&release);
	input_child_forked(pid, 200);
	CHECK(input_child_exit_due(200, 201, 0, 1) == 0, "passed while our child runs");
	CHECK(input_child_exit_due(200, 201, 2000000000ULL, 1) == 0,
	      "passed while our child runs, 2 s on");
	CHECK(input_child_exit_due(200, 201, CHILD_RUN_MAX_NS, 1) == 1,
	      "held past CHILD_RUN_MAX_NS");
	end_child(pid, release);
	CHECK(input_child_exit_due(200, 202, 0, 1) == 1, "held once our child exited");
	CHECK(waitpid(pid, NULL, 0) == pid, "reap");

	/* A child we will never have: one forked before our state began
	 * (may_fork 0) at once; one our timers may yet fork, after the
	 * twin's wait (two children are known here: neither is a twin). */
	CHECK(input_child_exit_due(300, 301, 0, 0) == 1, "held for a child we will never have");
	CHECK(input_child_exit_due(300, 301, 0, 1) == 0, "did not wait for a twin to be forked");
	CHECK(input_child_exit_due(300, 301, CHILD_TWIN_WAIT_NS, 1) == 1,
	      "held past CHILD_TWIN_WAIT_NS");
	return 0;
}
