/* failover: measures failover time as a client sees it.  It kills the
 * leader's server (SIGKILL) and then tries a Redis SET on every other
 * replica in turn until one acknowledges it; the time from the kill to
 * that +OK is the failover time.  Backups close a client at once and a
 * dead port refuses, so the loop learns quickly where not to write.
 *
 *   failover --kill PID HOST:PORT [HOST:PORT ...] [--timeout SECONDS]
 *
 * Prints one line: "failover_ms=T leader=HOST:PORT attempts=N". */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 16

static const char usage[] =
	"usage: failover --kill PID HOST:PORT [HOST:PORT ...] [--timeout SECONDS]\n"
	"\n"
	"Kills PID (the leader's server) with SIGKILL, then sends SET to each\n"
	"HOST:PORT in turn until one answers +OK; prints the time from the kill\n"
	"to that answer.  Exits 1 if none answers within the timeout (default 30 s).\n";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Waits up to MS for EVENTS on FD; 1 if ready. */
static int wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { fd, events, 0 };

	return poll(&p, 1, ms) == 1 && !(p.revents & POLLNVAL);
}

/* One SET on ADDR: 1 if it answered +OK, 0 otherwise (refused, closed,
 * an error reply, or nothing within a second: a leader that accepted the
 * connection answers a SET in far less). */
static int try_set(const struct sockaddr_in *addr, const char *key)
{
	char req[256], rep[64];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1, ok = 0;
	size_t got = 0;

	if (fd < 0)
		return 0;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, 100) ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
			goto out;
	}
	int n = snprintf(req, sizeof(req), "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$1\r\n1\r\n", strlen(key), key);
	if (write(fd, req, (size_t)n) != n)
		goto out;
	uint64_t deadline = now_ns() + 1000000000ULL;
	while (got < 5 && now_ns() < deadline) {
		if (!wait_fd(fd, POLLIN, 10))
			continue;
		ssize_t r = read(fd, rep + got, sizeof(rep) - 1 - got);
		if (r <= 0)
			goto out;
		got += (size_t)r;
	}
	ok = got >= 5 && !memcmp(rep, "+OK\r\n", 5);
out:
	close(fd);
	return ok;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr[MAX_TARGETS];
	const char *name[MAX_TARGETS];
	int ntargets = 0, timeout_s = 30;
	long pid = 0;
	char key[64];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--kill") && i + 1 < argc) {
			pid = strtol(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout_s = atoi(argv[++i]);
		} else {
			char host[64], *colon = strrchr(argv[i], ':');

			if (!colon || colon - argv[i] >= (long)sizeof(host) || ntargets == MAX_TARGETS) {
				fprintf(stderr, "failover: bad target '%s'\n%s", argv[i], usage);
				return 2;
			}
			memcpy(host, argv[i], (size_t)(colon - argv[i]));
			host[colon - argv[i]] = '\0';
			memset(&addr[ntargets], 0, sizeof(addr[0]));
			addr[ntargets].sin_family = AF_INET;
			addr[ntargets].sin_port = htons((uint16_t)atoi(colon + 1));
			if (inet_pton(AF_INET, host, &addr[ntargets].sin_addr) != 1) {
				fprintf(stderr, "failover: bad address '%s'\n", host);
				return 2;
			}
			name[ntargets++] = argv[i];
		}
	}
	if (pid <= 0 || !ntargets || timeout_s <= 0) {
		fputs(usage, stderr);
		return 2;
	}
	snprintf(key, sizeof(key), "failover:%ld", (long)getpid());
	uint64_t t0 = now_ns();
	if (kill((pid_t)pid, SIGKILL) < 0) {
		fprintf(stderr, "failover: cannot kill %ld: %s\n", pid, strerror(errno));
		return 2;
	}
	for (unsigned attempts = 1; now_ns() - t0 < (uint64_t)timeout_s * 1000000000ULL; attempts++) {
		int k = (int)(attempts % (unsigned)ntargets);

		if (try_set(&addr[k], key)) {
			printf("failover_ms=%.2f leader=%s attempts=%u\n", (double)(now_ns() - t0) / 1e6,
			       name[k], attempts);
			return 0;
		}
		if (k == ntargets - 1)
			usleep(200);	/* a round found nobody: do not hog the cores */
	}
	fprintf(stderr, "failover: no replica acknowledged a write within %d s\n", timeout_s);
	return 1;
}
