/* Reads a thread's scheduling state from /proc/self/task/TID/stat. */
#include "common/thread_state.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/sys.h"

uint32_t thread_id(void)
{
	static __thread uint32_t tid;

	if (!tid)
		tid = (uint32_t)syscall(SYS_gettid);
	return tid;
}

int thread_running(uint32_t tid)
{
	char path[64], buf[512];
	const char *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%u/stat", tid);
	fd = sys.open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = sys.read(fd, buf, sizeof(buf) - 1);
	sys.close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* "TID (comm) S ...": comm may hold spaces and parentheses. */
	end = strrchr(buf, ')');
	return end && end[1] == ' ' && end[2] == 'R';
}
