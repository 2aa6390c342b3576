/* One logger for the whole tree: levels, file:line, a per-file prefix.
 *
 * Every file that logs defines LOG_PREFIX before including this header.
 * The level comes from APUS_LOG_LEVEL (error|warn|info|debug, default info),
 * the sink from APUS_LOG_FILE (default stderr).  The logger writes with a raw
 * syscall so that inside the shim it never re-enters our own wrappers, and it
 * formats on the stack so it never allocates. */
#ifndef APUS_LOGGER_H
#define APUS_LOGGER_H

#include <errno.h>

#ifndef LOG_PREFIX
#define LOG_PREFIX ""
#endif

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern int logger_level;

void logger_init(const char *who);
void logger_print(int level, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define pr_log(lvl, fmt, ...)                                                  \
	do {                                                                   \
		if ((lvl) <= logger_level)                                     \
			logger_print(lvl, __FILE__, __LINE__, LOG_PREFIX fmt,  \
				     ##__VA_ARGS__);                           \
	} while (0)

#define pr_err(fmt, ...) pr_log(LOG_ERROR, fmt, ##__VA_ARGS__)
#define pr_warn(fmt, ...) pr_log(LOG_WARN, fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...) pr_log(LOG_INFO, fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) pr_log(LOG_DEBUG, fmt, ##__VA_ARGS__)
/* Like pr_err, with strerror(errno) appended; errno is preserved. */
#define pr_perror(fmt, ...)                                                    \
	do {                                                                   \
		int _e = errno;                                                \
		pr_err(fmt ": %s", ##__VA_ARGS__, strerror(_e));               \
		errno = _e;                                                    \
	} while (0)

#endif
