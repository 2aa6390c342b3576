/* What every apus command shares: errors, option parsing, where a node
 * runs (this host? its pid, its pid files), its network namespace, the
 * clock.  The commands themselves are one file each; apus.c dispatches. */
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
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
#include "coordinator/node/members.h"
#include "cli.h"
#include "owner.h"

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("apus: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_parse(struct cli *c, const char *cmd, const char *usage, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "node", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "since", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[600], *end;
	int o;

	memset(c, 0, sizeof(*c));
	c->node = -1;
	c->config_path = getenv("APUS_CONFIG");
	opterr = 0;
	optind = 1;
	while ((o = getopt_long(argc, argv, "c:n:jt:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			c->config_path = optarg;
			break;
		case 'n':
			c->node = (int)strtol(optarg, &end, 10);
			if (*end || c->node < 0) {
				cli_error("%s: --node wants a node id, not '%s'", cmd, optarg);
				return -1;
			}
			break;
		case 'j':
			c->json = 1;
			break;
		case 't':
			c->timeout_ms = (int)strtol(optarg, &end, 10);
			if (*end || c->timeout_ms <= 0) {
				cli_error("%s: --timeout wants milliseconds, not '%s'", cmd, optarg);
				return -1;
			}
			break;
		case 's':
			c->since = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return 1;
		default:
			cli_error("%s: unknown option '%s' (see 'apus %s --help')", cmd,
				  argv[optind - 1], cmd);
			return -1;
		}
	}
	if (optind < argc) {
		cli_error("%s: unexpected argument '%s' (see 'apus %s --help')", cmd, argv[optind],
			  cmd);
		return -1;
	}
	if (!c->config_path) {
		cli_error("%s: --config FILE is required (or set APUS_CONFIG)", cmd);
		return -1;
	}
	if (config_load(c->config_path, &c->cfg, err, sizeof(err))) {
		cli_error("%s", err);
		return -1;
	}
	/* A membership agreed since the file was written wins (members.h). */
	members_follow(&c->cfg, NULL, 0);
	if (c->node >= c->cfg.nnodes) {
		cli_error("%s: node %d is not in %s (it has nodes 0..%d)", cmd, c->node,
			  c->cfg.path, c->cfg.nnodes - 1);
		return -1;
	}
	if (!c->timeout_ms)
		c->timeout_ms = c->cfg.start_timeout_ms;
	return 0;
}

const char *cli_take_option(int argc, char **argv, const char *name, char shrt, char **rest,
			    int *n)
{
	const char *v = NULL;
	char s[3] = { '-', shrt, '\0' };
	size_t len = strlen(name);

	*n = 0;
	for (int i = 0; i < argc && *n < 63; i++) {
		const char *a = argv[i];

		if (i + 1 < argc && (!strcmp(a, s) || (!strncmp(a, "--", 2) && !strcmp(a + 2, name))))
			v = argv[++i];
		else if (!strncmp(a, "--", 2) && !strncmp(a + 2, name, len) && a[2 + len] == '=')
			v = a + 3 + len;
		else
			rest[(*n)++] = argv[i];
	}
	rest[*n] = NULL;
	return v;
}

int cli_node_is_local(const struct apus_config *cfg, int node)
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

int cli_enter_netns(const char *name)
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

int cli_pid_alive(pid_t pid)
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

pid_t cli_pidfile_pid(const struct apus_config *cfg, int node, const char *name)
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
	return cli_pid_alive(pid) ? pid : 0;
}

void cli_write_pidfile(const struct apus_config *cfg, int node, const char *name, pid_t pid)
{
	char path[PATH_MAX];
	FILE *f;

	if (config_run_path(cfg, node, name, path, sizeof(path)) ||
	    cli_mkdirs(cfg->nodes[node].run_dir))
		return;
	f = fopen(path, "we");
	if (f) {
		fprintf(f, "%d\n", (int)pid);
		fclose(f);
	}
}

pid_t cli_node_pid(const struct apus_config *cfg, int node)
{
	pid_t pid = cli_pidfile_pid(cfg, node, "apus.pid");

	return node_owns_pid(cfg, node, pid) ? pid : 0;
}

void cli_redirect_stdio(const char *log)
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

uint64_t cli_mono_ms(void)
{
	return now_ns() / 1000000;
}

void cli_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}
