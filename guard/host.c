/* The nodes' processes on this host (host.h): where a node runs (this
 * host? its pid, its pid files), its network namespace, the clock; and
 * the error line the guard and these helpers print.  Starting a node's
 * processes is spawn.c, stopping them stop.c. */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <ifaddrs.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "host.h"
#include "owner.h"

void host_verror(const char *fmt, va_list ap)
{
	fputs("apus: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void host_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	host_verror(fmt, ap);
	va_end(ap);
}

int host_node_is_local(const struct apus_config *cfg, int node)
{
	const char *addr = cfg->nodes[node].address;
	struct in6_addr a6, b6;
	struct in_addr a4;
	struct ifaddrs *ifs, *i;
	int local = 0;

	/* A node in a named network namespace of this host. */
	if (cfg->nodes[node].netns[0]) {
		char path[128];
		snprintf(path, sizeof(path), "/var/run/netns/%s", cfg->nodes[node].netns);
		return access(path, F_OK) == 0;
	}
	if (inet_pton(AF_INET, addr, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127)
		return 1;
	if (inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6))
		return 1;
	if (getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i && !local; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET && inet_pton(AF_INET, addr, &a4) == 1)
			local = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a4.s_addr;
		else if (i->ifa_addr->sa_family == AF_INET6 && inet_pton(AF_INET6, addr, &b6) == 1)
			local = !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, &b6,
					sizeof(b6));
	}
	freeifaddrs(ifs);
	return local;
}

int host_enter_netns(const char *name)
{
	char path[128];
	int fd, rc;

	snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = setns(fd, CLONE_NEWNET);
	close(fd);
	return rc;
}

/* Whether PID's thread group has a thread other than its leader. */
/* The state letter of PATH, a /proc stat file (0: unreadable). */
static char stat_state(const char *path)
{
	char buf[512], *p, state = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ')
		state = p[2];
	fclose(f);
	return state;
}

/* Whether another thread of PID lives.  Threads killed while a tracer
 * holds them (CRIU's dump) stay listed, as zombies, until it lets go. */
static int has_other_threads(pid_t pid)
{
	char path[300];
	struct dirent *e;
	DIR *d;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		char state;

		if (e->d_name[0] == '.' || atoi(e->d_name) == (int)pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
		state = stat_state(path);
		found = state && state != 'Z' && state != 'X';
	}
	closedir(d);
	return found;
}

int host_pid_alive(pid_t pid)
{
	char path[64], state;

	if (pid <= 0 || kill(pid, 0) < 0)
		return 0;
	/* A zombie still answers kill(0). */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	state = stat_state(path);
	/* A leader thread is a zombie for a moment while another thread of
	 * its process execs (the shim re-executes its server from its role
	 * thread), and for good when it called pthread_exit: the process
	 * lives while another of its threads does. */
	if (state == 'Z' || state == 'X')
		return has_other_threads(pid);
	return state != 0;
}

pid_t host_pidfile_pid(const struct apus_config *cfg, int node, const char *name)
{
	char path[PATH_MAX];
	FILE *f;
	int pid = 0;

	if (config_run_path(cfg, node, name, path, sizeof(path)))
		return 0;
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	return host_pid_alive(pid) ? pid : 0;
}

void host_write_pidfile(const struct apus_config *cfg, int node, const char *name, pid_t pid)
{
	char path[PATH_MAX];
	FILE *f;

	if (config_run_path(cfg, node, name, path, sizeof(path)) ||
	    host_mkdirs(cfg->nodes[node].run_dir))
		return;
	f = fopen(path, "we");
	if (f) {
		fprintf(f, "%d\n", (int)pid);
		fclose(f);
	}
}

pid_t host_node_pid(const struct apus_config *cfg, int node)
{
	pid_t pid = host_pidfile_pid(cfg, node, "apus.pid");

	return node_owns_pid(cfg, node, pid) ? pid : 0;
}

pid_t host_guard_pid(const struct apus_config *cfg, int node)
{
	return host_pidfile_pid(cfg, node, GUARD_PIDFILE);
}

void host_redirect_stdio(const char *log)
{
	int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (null >= 0)
		dup2(null, 0);
}

uint64_t host_mono_ms(void)
{
	return now_ns() / 1000000;
}

void host_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}
