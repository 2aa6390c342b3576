#include "common/logger.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/sys.h"

int logger_level = LOG_INFO;
static int logger_fd = 2;
static char logger_who[32] = "apus";

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void logger_init(const char *who)
{
	const char *lvl = getenv("APUS_LOG_LEVEL");
	const char *file = getenv("APUS_LOG_FILE");

	if (who)
		snprintf(logger_who, sizeof(logger_who), "%s", who);
	if (lvl) {
		for (int i = 0; i <= LOG_DEBUG; i++)
			if (!strcmp(lvl, level_names[i]))
				logger_level = i;
	}
	if (file && *file) {
		int fd = sys.open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			logger_fd = fd;
	}
}

void logger_print(int level, const char *file, int line, const char *fmt, ...)
{
	char buf[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, saved = errno;
	const char *base = strrchr(file, '/');

	sys.clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = snprintf(buf, sizeof(buf), "%02d:%02d:%02d.%06ld %s[%d] %s %s:%d: ",
		     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000,
		     logger_who, (int)getpid(), level_names[level],
		     base ? base + 1 : file, line);
	if (n < 0 || n >= (int)sizeof(buf))
		n = 0;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	/* A raw syscall: inside the shim, write() would be our own wrapper. */
	syscall(SYS_write, logger_fd, buf, (size_t)n);
	errno = saved;
}
