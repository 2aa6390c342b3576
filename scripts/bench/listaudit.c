/* listaudit: an audit of acknowledged writes, stronger than "the key exists".
 *
 * write: C connections RPUSH unique elements to one list and log, for every
 * acknowledged RPUSH, the position its reply gave ("ack <pos> <element>"),
 * and for every request without a good answer "fail <element> <reason>".
 * A connection that fails is re-established on the next --addr in turn, so
 * that a run goes on across a failover of a replicated Redis.
 *
 * check: reads the list back (LRANGE K 0 -1) and verifies that every
 * acknowledged element is at its position and that no element appears
 * twice (a failed one may be there, at most once).
 *
 * Exit: 0 ok; 1 the time ran out (write) or the check failed; 2 bad usage. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define MAX_ADDRS 16
#define REQ_TIMEOUT_MS 5000	/* a request unanswered this long has failed */
#define CONNECT_TIMEOUT_MS 2000 /* a TCP connect, and then again its PING */
#define READ_IDLE_MS 30000	/* check: the longest LRANGE's reply may stall */
#define BACKOFF_MS 50		/* pause after any failure, before the next try */
#define SLICE_MS 100		/* how often a waiting thread looks at the clock and signals */
#define MAX_LINE 65536		/* longest RESP line accepted */
#define MAX_SIZE (1u << 20)	/* largest --size */
#define MAX_BULK (512u << 20)	/* largest list element check accepts */
#define MAX_PROBLEMS 20		/* problems check prints before just counting them */
#define SHOW_CHARS 40		/* how much of an element a message shows */
#define WHY_LEN 160		/* room for the reason of a failure */

enum mode { WRITE, CHECK };

/* One --addr: TCP host and port, or (check only) a unix socket path. */
struct addr {
	const char *text; /* as given, for messages */
	char host[256];	  /* or the socket path when port is empty */
	char port[6];
};

struct opts {
	enum mode mode;
	struct addr addrs[MAX_ADDRS];
	int naddrs;
	const char *log, *key;
	uint64_t clients, count, size, seconds;
};

/* Set by SIGTERM/SIGINT, or when the log cannot be written: every client
 * stops.  A lock-free atomic, so safe to set from a signal handler. */
static atomic_int g_stop;
/* write: the end of --seconds, CLOCK_MONOTONIC ms; set before any thread. */
static uint64_t g_deadline_ms = UINT64_MAX;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool should_stop(void) { return atomic_load(&g_stop) || now_ms() >= g_deadline_ms; }

/* Sleep ms milliseconds, or less when told to stop. */
static void nap(uint64_t ms)
{
	uint64_t end = now_ms() + ms, t;
	while (!should_stop() && (t = now_ms()) < end) {
		uint64_t d = end - t < SLICE_MS ? end - t : SLICE_MS;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)(d * 1000000u) };
		nanosleep(&ts, NULL);
	}
}

/* errno e as text into why (thread-safe). */
static void why_errno(char *why, int e)
{
	char tmp[WHY_LEN];
	snprintf(why, WHY_LEN, "%s", strerror_r(e, tmp, sizeof tmp));
}

/* A strict decimal integer of 1 to 18 digits, optionally negative. */
static int parse_i64(const char *p, size_t n, int64_t *v)
{
	bool neg = n > 0 && p[0] == '-';
	size_t i = neg;
	if (n == i || n - i > 18)
		return -1;
	int64_t x = 0;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		x = x * 10 + (p[i] - '0');
	}
	*v = neg ? -x : x;
	return 0;
}

/* ---- connections: a socket and a buffer of what it has received ---- */

struct conn {
	int fd; /* -1: not connected */
	char *buf;
	size_t start, end, cap; /* unread bytes are buf[start, end) */
};

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->start = c->end = 0;
}

/* Wait until fd is ready for events, in slices so that a stop is seen.
 * 1: ready (or in error: the next call on fd tells); 0: deadline passed;
 * -1: told to stop. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		if (should_stop())
			return -1;
		uint64_t t = now_ms();
		if (t >= deadline)
			return 0;
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, (int)(deadline - t < SLICE_MS ? deadline - t : SLICE_MS));
		if (r > 0 || (r < 0 && errno != EINTR))
			return 1;
	}
}

/* Give a wait_fd result other than 1 its reason. */
static void why_wait(char *why, int r)
{
	snprintf(why, WHY_LEN, "%s", r == 0 ? "timeout" : "stopped before the reply");
}

/* Connect a non-blocking socket to ai within CONNECT_TIMEOUT_MS.  The fd, or
 * -1 with why set. */
static int connect_one(const struct sockaddr *sa, socklen_t len, int family, char *why)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0, one = 1;
	socklen_t elen = sizeof err;
	if (fd < 0) {
		why_errno(why, errno);
		return -1;
	}
	if (family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, sa, len) == 0)
		return fd;
	if (errno != EINPROGRESS && errno != EAGAIN) {
		why_errno(why, errno);
		close(fd);
		return -1;
	}
	int r = wait_fd(fd, POLLOUT, now_ms() + CONNECT_TIMEOUT_MS);
	if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
		return fd;
	if (r == 1)
		why_errno(why, err ? err : errno);
	else
		snprintf(why, WHY_LEN, "%s", r == 0 ? "connect timeout" : "stopped");
	close(fd);
	return -1;
}

/* Open c to a: its first address that accepts.  0, or -1 with why set. */
static int conn_open(struct conn *c, const struct addr *a, char *why)
{
	conn_close(c);
	if (!a->port[0]) {
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		size_t n = strlen(a->host); /* addr_arg checked that it fits */
		memcpy(un.sun_path, a->host, n < sizeof un.sun_path ? n : sizeof un.sun_path - 1);
		c->fd = connect_one((struct sockaddr *)&un, sizeof un, AF_UNIX, why);
		return c->fd < 0 ? -1 : 0;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int rc = getaddrinfo(a->host, a->port, &hints, &res);
	if (rc) {
		snprintf(why, WHY_LEN, "%s", gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai && c->fd < 0; ai = ai->ai_next)
		c->fd = connect_one(ai->ai_addr, ai->ai_addrlen, ai->ai_family, why);
	freeaddrinfo(res);
	return c->fd < 0 ? -1 : 0;
}

/* Send all of buf before deadline.  0, or -1 with why set. */
static int conn_send(struct conn *c, const char *buf, size_t len, uint64_t deadline, char *why)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			why_errno(why, errno);
			return -1;
		}
		int r = wait_fd(c->fd, POLLOUT, deadline);
		if (r != 1) {
			why_wait(why, r);
			return -1;
		}
	}
	return 0;
}

/* Make room for at least want more bytes after c->end, compacting first and
 * then growing the buffer.  0, or -1 when out of memory. */
static int conn_room(struct conn *c, size_t want)
{
	if (c->cap - c->end >= want)
		return 0;
	if (c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	size_t cap = c->cap ? c->cap : 65536;
	while (cap - c->end < want)
		cap *= 2;
	if (cap == c->cap)
		return 0;
	char *p = realloc(c->buf, cap);
	if (!p)
		return -1;
	c->buf = p;
	c->cap = cap;
	return 0;
}

/* Receive at least one more byte (want: the room to offer, a hint).  0, or
 * -1 with why set: closed, reset, timeout, stopped. */
static int conn_fill(struct conn *c, size_t want, uint64_t deadline, char *why)
{
	if (conn_room(c, want < 16384 ? 16384 : want)) {
		snprintf(why, WHY_LEN, "out of memory");
		return -1;
	}
	for (;;) {
		ssize_t n = recv(c->fd, c->buf + c->end, c->cap - c->end, 0);
		if (n > 0) {
			c->end += (size_t)n;
			return 0;
		}
		if (n == 0) {
			snprintf(why, WHY_LEN, "connection closed");
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			why_errno(why, errno);
			return -1;
		}
		int r = wait_fd(c->fd, POLLIN, deadline);
		if (r != 1) {
			why_wait(why, r);
			return -1;
		}
	}
}

/* The next line of the reply, without its CRLF, in *line and *len (valid
 * until the next call on c).  0, or -1 with why set. */
static int conn_line(struct conn *c, uint64_t deadline, const char **line, size_t *len, char *why)
{
	size_t scanned = 0;
	for (;;) {
		size_t avail = c->end - c->start - scanned;
		char *nl = avail ? memchr(c->buf + c->start + scanned, '\n', avail) : NULL;
		if (nl) {
			size_t n = (size_t)(nl - (c->buf + c->start));
			if (n == 0 || nl[-1] != '\r') {
				snprintf(why, WHY_LEN, "malformed reply (a line not ended by CRLF)");
				return -1;
			}
			*line = c->buf + c->start;
			*len = n - 1;
			c->start += n + 1;
			return 0;
		}
		scanned = c->end - c->start;
		if (scanned > MAX_LINE) {
			snprintf(why, WHY_LEN, "malformed reply (a line over %d bytes)", MAX_LINE);
			return -1;
		}
		if (conn_fill(c, 0, deadline, why))
			return -1;
	}
}

/* The next n bytes of the reply in *p (valid until the next call on c).
 * 0, or -1 with why set. */
static int conn_take(struct conn *c, size_t n, uint64_t deadline, const char **p, char *why)
{
	while (c->end - c->start < n)
		if (conn_fill(c, n - (c->end - c->start), deadline, why))
			return -1;
	*p = c->buf + c->start;
	c->start += n;
	return 0;
}

/* Send one command (argv: nargs strings of the given lengths) in RESP.
 * 0, or -1 with why set. */
static int send_command(struct conn *c, int nargs, const char *const *argv, const size_t *lens, uint64_t deadline,
			char *why)
{
	size_t total = 16;
	for (int i = 0; i < nargs; i++)
		total += lens[i] + 32;
	char *req = malloc(total), *w = req;
	if (!req) {
		snprintf(why, WHY_LEN, "out of memory");
		return -1;
	}
	w += sprintf(w, "*%d\r\n", nargs);
	for (int i = 0; i < nargs; i++) {
		w += sprintf(w, "$%zu\r\n", lens[i]);
		memcpy(w, argv[i], lens[i]);
		w += lens[i];
		*w++ = '\r';
		*w++ = '\n';
	}
	int rc = conn_send(c, req, (size_t)(w - req), deadline, why);
	free(req);
	return rc;
}

/* Copy a reply line into why as the reason of a failure (printable ASCII). */
static void why_reply(char *why, const char *prefix, const char *line, size_t len)
{
	size_t n = (size_t)snprintf(why, WHY_LEN, "%s", prefix);
	for (size_t i = 0; i < len && n + 1 < WHY_LEN; i++)
		why[n++] = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
	why[n] = '\0';
}

/* Open c to a and check that it serves: PING answered +PONG (a replica that
 * is not the leader closes the connection or answers an error).  0, or -1
 * with why set and c closed. */
static int conn_serving(struct conn *c, const struct addr *a, char *why)
{
	static const char *const ping[] = { "PING" };
	static const size_t ping_len[] = { 4 };
	const char *line;
	size_t len;
	uint64_t deadline = now_ms() + REQ_TIMEOUT_MS;
	if (conn_open(c, a, why) || send_command(c, 1, ping, ping_len, deadline, why) ||
	    conn_line(c, deadline, &line, &len, why)) {
		conn_close(c);
		return -1;
	}
	if (len != 5 || memcmp(line, "+PONG", 5)) {
		why_reply(why, "PING: ", line, len);
		conn_close(c);
		return -1;
	}
	return 0;
}

/* ---- write ---- */

struct writer {
	const struct opts *o;
	int logfd;
	pthread_mutex_t mu; /* the log, the counters, last_err */
	uint64_t acked, failed;
	bool log_error;
	char last_err[WHY_LEN + 300]; /* the latest failure to reach a server */
};

struct client {
	struct writer *w;
	unsigned id;
	struct conn c;
	int addr;	/* the --addr connected to, or to try next */
	uint64_t seq;	/* requests sent: the next element's number */
	uint64_t acked; /* of this client */
	char *elem;
	size_t elen;
	bool done; /* acked its --count */
};

/* Append one whole line to the log with one write(2) per line, so that the
 * log holds every line written so far even if the tool is killed.  Count
 * the line as an ack or a fail.  On a write error, stop every client. */
static void log_put(struct writer *w, const char *line, size_t len, bool ack)
{
	pthread_mutex_lock(&w->mu);
	size_t off = 0;
	while (off < len && !w->log_error) {
		ssize_t n = write(w->logfd, line + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			char tmp[WHY_LEN];
			fprintf(stderr, "listaudit: %s: %s\n", w->o->log, n < 0 ? strerror_r(errno, tmp, sizeof tmp) : "short write");
			w->log_error = true;
			atomic_store(&g_stop, 1);
		}
		off += n > 0 ? (size_t)n : 0;
	}
	if (ack)
		w->acked++;
	else
		w->failed++;
	pthread_mutex_unlock(&w->mu);
}

/* Log "ack <pos> <element>" or, with pos 0, "fail <element> <why>". */
static void log_result(struct writer *w, uint64_t pos, const char *elem, size_t elen, const char *why)
{
	char *line = malloc(elen + WHY_LEN + 48);
	if (!line) {
		fprintf(stderr, "listaudit: out of memory\n");
		exit(1);
	}
	size_t n;
	if (pos) {
		n = (size_t)sprintf(line, "ack %" PRIu64 " ", pos);
		memcpy(line + n, elem, elen);
		n += elen;
	} else {
		memcpy(line, "fail ", 5);
		memcpy(line + 5, elem, elen);
		n = 5 + elen + (size_t)sprintf(line + 5 + elen, " %s", why);
	}
	line[n++] = '\n';
	log_put(w, line, n, pos != 0);
	free(line);
}

/* Remember why a server could not be reached, for the end of the run. */
static void note_unreachable(struct writer *w, const struct addr *a, const char *why)
{
	pthread_mutex_lock(&w->mu);
	snprintf(w->last_err, sizeof w->last_err, "%s: %s", a->text, why);
	pthread_mutex_unlock(&w->mu);
}

/* The client's next element in cl->elem: "c<id>-<seq>-" padded with 'x' to
 * --size bytes (longer when the prefix alone is longer).  Never reused. */
static void next_element(struct client *cl)
{
	size_t n = (size_t)sprintf(cl->elem, "c%u-%" PRIu64 "-", cl->id, cl->seq++);
	size_t size = (size_t)cl->w->o->size;
	if (n < size) {
		memset(cl->elem + n, 'x', size - n);
		n = size;
	}
	cl->elen = n;
}

/* Connect to the current --addr, the next one in turn on failure (after a
 * short pause).  0 when connected to a server that answers. */
static int client_connect(struct client *cl)
{
	const struct opts *o = cl->w->o;
	char why[WHY_LEN];
	if (conn_serving(&cl->c, &o->addrs[cl->addr], why) == 0)
		return 0;
	if (!should_stop())
		note_unreachable(cl->w, &o->addrs[cl->addr], why);
	cl->addr = (cl->addr + 1) % o->naddrs;
	nap(BACKOFF_MS);
	return -1;
}

/* RPUSH the client's element to the key.  0 with the list's new length in
 * *pos, or -1 with why set: no reply in REQ_TIMEOUT_MS, an error reply, a
 * closed connection, a stop. */
static int rpush(struct client *cl, uint64_t *pos, char *why)
{
	const char *key = cl->w->o->key;
	const char *argv[] = { "RPUSH", key, cl->elem };
	const size_t lens[] = { 5, strlen(key), cl->elen };
	uint64_t deadline = now_ms() + REQ_TIMEOUT_MS;
	const char *line;
	size_t len;
	int64_t v;
	if (send_command(&cl->c, 3, argv, lens, deadline, why) || conn_line(&cl->c, deadline, &line, &len, why))
		return -1;
	if (len > 1 && line[0] == ':' && parse_i64(line + 1, len - 1, &v) == 0 && v > 0) {
		*pos = (uint64_t)v;
		return 0;
	}
	why_reply(why, line[0] == '-' ? "" : "unexpected reply: ", line, len);
	return -1;
}

/* A client's thread: RPUSH --count acknowledged elements, logging each
 * request's outcome; after a failure, a new connection (next --addr) and a
 * new element.  Until done, stopped, or --seconds are over. */
static void *client_run(void *arg)
{
	struct client *cl = arg;
	const struct opts *o = cl->w->o;
	char why[WHY_LEN];
	uint64_t pos;
	while (cl->acked < o->count && !should_stop()) {
		if (cl->c.fd < 0 && client_connect(cl))
			continue;
		next_element(cl);
		if (rpush(cl, &pos, why) == 0) {
			log_result(cl->w, pos, cl->elem, cl->elen, NULL);
			cl->acked++;
			continue;
		}
		log_result(cl->w, 0, cl->elem, cl->elen, why);
		conn_close(&cl->c);
		cl->addr = (cl->addr + 1) % o->naddrs;
		nap(BACKOFF_MS);
	}
	cl->done = cl->acked == o->count;
	conn_close(&cl->c);
	return NULL;
}

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&g_stop, 1);
}

/* Run the clients until each has acked --count elements or --seconds are
 * over; print the summary.  The exit status. */
static int do_write(const struct opts *o)
{
	struct writer w = { .o = o, .mu = PTHREAD_MUTEX_INITIALIZER };
	w.logfd = open(o->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w.logfd < 0) {
		fprintf(stderr, "listaudit: %s: %s\n", o->log, strerror(errno));
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	uint64_t t0 = now_ms();
	g_deadline_ms = t0 + o->seconds * 1000u;
	struct client *cl = calloc(o->clients, sizeof *cl);
	pthread_t *th = calloc(o->clients, sizeof *th);
	size_t cap = (o->size > 64 ? (size_t)o->size : 64) + 1;
	uint64_t started = 0, done = 0;
	for (uint64_t i = 0; cl && th && i < o->clients; i++) {
		cl[i] = (struct client){ .w = &w, .id = (unsigned)i, .c.fd = -1, .elem = malloc(cap) };
		if (!cl[i].elem || pthread_create(&th[i], NULL, client_run, &cl[i])) {
			fprintf(stderr, "listaudit: cannot start client %" PRIu64 "\n", i);
			atomic_store(&g_stop, 1);
			free(cl[i].elem);
			break;
		}
		started++;
	}
	for (uint64_t i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		done += cl[i].done;
		free(cl[i].c.buf);
		free(cl[i].elem);
	}
	printf("listaudit: %" PRIu64 " acked, %" PRIu64 " failed in %.1f s\n", w.acked, w.failed,
	       (double)(now_ms() - t0) / 1000.0);
	fflush(stdout);
	bool ok = started == o->clients && done == o->clients && !w.log_error;
	if (!ok && w.last_err[0])
		fprintf(stderr, "listaudit: last connection failure: %s\n", w.last_err);
	if (close(w.logfd) && !w.log_error) {
		fprintf(stderr, "listaudit: %s: %s\n", o->log, strerror(errno));
		ok = false;
	}
	free(cl);
	free(th);
	return ok ? 0 : 1;
}

/* ---- check ---- */

/* A string held elsewhere: in the log's text or the list's arena. */
struct span {
	size_t off, len;
};

/* The list as read back: its elements, one after another, in arena. */
struct list {
	char *arena;
	size_t used, cap;
	struct span *items;
	size_t n;
};

/* One line of the log: an ack (pos > 0) or a fail (pos 0). */
struct entry {
	struct span el; /* in the log's text */
	uint64_t pos;
};

/* A growing array of entries. */
struct entries {
	struct entry *v;
	size_t n, cap;
};

struct auditlog {
	char *text;
	struct entries acks, fails;
};

/* One distinct element of the list: where it is, how often. */
struct slot {
	uint64_t hash;
	size_t first, second; /* 1-based positions of its first two copies; 0: empty slot */
	size_t count;
	bool logged; /* some ack or fail line names it */
};

struct table {
	struct slot *s;
	size_t mask;
};

static uint64_t fnv1a(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

/* A printable, shortened copy of s for messages, in buf (>= 4*SHOW_CHARS+32). */
static const char *show(char *buf, const char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n && i < SHOW_CHARS; i++) {
		unsigned char ch = (unsigned char)s[i];
		o += (size_t)(ch >= 0x20 && ch < 0x7f && ch != '\\' ? sprintf(buf + o, "%c", ch)
								    : sprintf(buf + o, "\\x%02x", ch));
	}
	if (n > SHOW_CHARS)
		sprintf(buf + o, "...(%zu bytes)", n);
	else
		buf[o] = '\0';
	return buf;
}

/* Read the whole file at path into a NUL-terminated buffer.  NULL on error
 * (said on stderr). */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;
	if (!f) {
		fprintf(stderr, "listaudit: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (cap - n < 65536) {
			char *p = realloc(buf, cap = cap ? cap * 2 : 1 << 20);
			if (!p) {
				fprintf(stderr, "listaudit: %s: out of memory\n", path);
				fclose(f);
				free(buf);
				return NULL;
			}
			buf = p;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "listaudit: %s: read error\n", path);
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Append e to es, growing it.  -1 when out of memory. */
static int push_entry(struct entries *es, struct entry e)
{
	if (es->n == es->cap) {
		size_t cap = es->cap ? es->cap * 2 : 1024;
		struct entry *p = realloc(es->v, cap * sizeof *p);
		if (!p)
			return -1;
		es->v = p;
		es->cap = cap;
	}
	es->v[es->n++] = e;
	return 0;
}

/* Parse one log line (no newline) at text[off, off+len) into e.  0, or -1
 * when malformed. */
static int parse_log_line(const char *text, size_t off, size_t len, struct entry *e)
{
	const char *l = text + off, *sp1 = memchr(l, ' ', len), *sp2;
	if (!sp1)
		return -1;
	size_t rest = len - (size_t)(sp1 + 1 - l);
	sp2 = memchr(sp1 + 1, ' ', rest);
	if (sp1 - l == 3 && !memcmp(l, "ack", 3)) {
		int64_t pos;
		if (!sp2 || parse_i64(sp1 + 1, (size_t)(sp2 - sp1 - 1), &pos) || pos < 1)
			return -1;
		e->pos = (uint64_t)pos;
		e->el = (struct span){ (size_t)(sp2 + 1 - text), len - (size_t)(sp2 + 1 - l) };
	} else if (sp1 - l == 4 && !memcmp(l, "fail", 4)) {
		e->pos = 0;
		e->el = (struct span){ (size_t)(sp1 + 1 - text), sp2 ? (size_t)(sp2 - sp1 - 1) : rest };
	} else {
		return -1;
	}
	return e->el.len > 0 && !memchr(text + e->el.off, ' ', e->el.len) ? 0 : -1;
}

/* Read the log written by write: its ack and fail lines.  A last line cut
 * short (no newline) is ignored with a note.  0, or -1 (said on stderr). */
static int read_log(const char *path, struct auditlog *lg)
{
	size_t len, lineno = 0;
	if (!(lg->text = read_file(path, &len)))
		return -1;
	for (size_t off = 0; off < len;) {
		char *nl = memchr(lg->text + off, '\n', len - off);
		lineno++;
		if (!nl) {
			fprintf(stderr, "listaudit: note: %s:%zu: ignoring a last line without its newline\n", path, lineno);
			break;
		}
		size_t n = (size_t)(nl - (lg->text + off));
		struct entry e;
		if (n > 0 && parse_log_line(lg->text, off, n, &e)) {
			fprintf(stderr, "listaudit: %s:%zu: malformed line (want 'ack POS ELEMENT' or 'fail ELEMENT REASON')\n",
				path, lineno);
			return -1;
		}
		if (n > 0 && push_entry(e.pos ? &lg->acks : &lg->fails, e)) {
			fprintf(stderr, "listaudit: %s: out of memory\n", path);
			return -1;
		}
		off += n + 1;
	}
	return 0;
}

/* Append one element of n bytes at p to the list.  -1 when out of memory. */
static int list_append(struct list *l, const char *p, size_t n)
{
	if (l->cap - l->used < n) {
		size_t cap = l->cap ? l->cap : 1 << 20;
		while (cap - l->used < n)
			cap *= 2;
		char *a = realloc(l->arena, cap);
		if (!a)
			return -1;
		l->arena = a;
		l->cap = cap;
	}
	memcpy(l->arena + l->used, p, n);
	l->items[l->n++] = (struct span){ l->used, n };
	l->used += n;
	return 0;
}

/* Read the array reply of LRANGE into l: "*<count>" then one "$<len>" bulk
 * string per element.  0, or -1 with why set. */
static int read_array(struct conn *c, struct list *l, char *why)
{
	const char *line, *p;
	size_t len;
	int64_t count, n;
	if (conn_line(c, now_ms() + READ_IDLE_MS, &line, &len, why))
		return -1;
	if (len < 2 || line[0] != '*' || parse_i64(line + 1, len - 1, &count) || count < 0) {
		why_reply(why, line[0] == '-' ? "LRANGE: " : "LRANGE: unexpected reply: ", line, len);
		return -1;
	}
	if (!(l->items = malloc(((size_t)count + 1) * sizeof *l->items))) {
		snprintf(why, WHY_LEN, "out of memory for %" PRId64 " elements", count);
		return -1;
	}
	for (int64_t i = 0; i < count; i++) {
		uint64_t deadline = now_ms() + READ_IDLE_MS;
		if (conn_line(c, deadline, &line, &len, why))
			return -1;
		if (len < 2 || line[0] != '$' || parse_i64(line + 1, len - 1, &n) || n < 0 || n > (int64_t)MAX_BULK) {
			why_reply(why, "LRANGE: unexpected element: ", line, len);
			return -1;
		}
		if (conn_take(c, (size_t)n + 2, deadline, &p, why))
			return -1;
		if (p[n] != '\r' || p[n + 1] != '\n') {
			snprintf(why, WHY_LEN, "LRANGE: malformed bulk string %" PRId64, i + 1);
			return -1;
		}
		if (list_append(l, p, (size_t)n)) {
			snprintf(why, WHY_LEN, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* LRANGE key 0 -1 at a into l.  0, or -1 (said on stderr). */
static int fetch_list(const struct addr *a, const char *key, struct list *l)
{
	struct conn c = { .fd = -1 };
	char why[WHY_LEN];
	const char *argv[] = { "LRANGE", key, "0", "-1" };
	const size_t lens[] = { 6, strlen(key), 1, 2 };
	int rc = conn_open(&c, a, why);
	if (rc == 0)
		rc = send_command(&c, 4, argv, lens, now_ms() + READ_IDLE_MS, why);
	if (rc == 0)
		rc = read_array(&c, l, why);
	if (rc)
		fprintf(stderr, "listaudit: %s: %s\n", a->text, why);
	conn_close(&c);
	free(c.buf);
	return rc;
}

/* The slot of element (p, n) in t: its own, or the empty one it would take. */
static struct slot *lookup(const struct table *t, const struct list *l, const char *p, size_t n)
{
	uint64_t h = fnv1a(p, n);
	for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
		struct slot *s = &t->s[i];
		if (!s->first)
			return s->hash = h, s;
		const struct span *e = &l->items[s->first - 1];
		if (s->hash == h && e->len == n && !memcmp(l->arena + e->off, p, n))
			return s;
	}
}

/* Index the list's distinct elements: where each first appears, how often.
 * -1 when out of memory. */
static int index_list(const struct list *l, struct table *t)
{
	size_t cap = 1024;
	while (cap < 2 * l->n)
		cap *= 2;
	if (!(t->s = calloc(cap, sizeof *t->s)))
		return -1;
	t->mask = cap - 1;
	for (size_t i = 0; i < l->n; i++) {
		struct slot *s = lookup(t, l, l->arena + l->items[i].off, l->items[i].len);
		if (!s->first)
			s->first = i + 1;
		else if (!s->second)
			s->second = i + 1;
		s->count++;
	}
	return 0;
}

/* Count a problem; print it on stderr while fewer than MAX_PROBLEMS were. */
static __attribute__((format(printf, 2, 3))) void problem(size_t *n, const char *fmt, ...)
{
	if ((*n)++ >= MAX_PROBLEMS)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("listaudit: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Whether ack e has its element at its position; a problem if not. */
static bool check_ack(const struct auditlog *lg, const struct entry *e, const struct list *l, const struct table *t,
		      size_t *nprob)
{
	const char *el = lg->text + e->el.off;
	struct slot *s = lookup(t, l, el, e->el.len);
	char a[4 * SHOW_CHARS + 32], b[4 * SHOW_CHARS + 32], where[64];
	if (s->first)
		s->logged = true;
	if (e->pos <= l->n) {
		const struct span *at = &l->items[e->pos - 1];
		if (at->len == e->el.len && !memcmp(l->arena + at->off, el, at->len))
			return true;
	}
	if (s->first)
		snprintf(where, sizeof where, "it is at position %zu", s->first);
	else
		snprintf(where, sizeof where, "it is not in the list");
	if (e->pos > l->n)
		problem(nprob, "acked %s at position %" PRIu64 ": the list has only %zu elements; %s",
			show(a, el, e->el.len), e->pos, l->n, where);
	else
		problem(nprob, "acked %s at position %" PRIu64 ": the list has %s there; %s", show(a, el, e->el.len), e->pos,
			show(b, l->arena + l->items[e->pos - 1].off, l->items[e->pos - 1].len), where);
	return false;
}

/* Report every element that appears more than once, in list order.  The
 * number of such elements. */
static size_t check_duplicates(const struct list *l, const struct table *t, size_t *nprob)
{
	size_t dups = 0;
	char a[4 * SHOW_CHARS + 32];
	for (size_t i = 0; i < l->n; i++) {
		const char *p = l->arena + l->items[i].off;
		struct slot *s = lookup(t, l, p, l->items[i].len);
		if (s->count < 2 || s->first != i + 1)
			continue;
		dups++;
		problem(nprob, "%s appears %zu times (positions %zu, %zu%s)", show(a, p, l->items[i].len), s->count,
			s->first, s->second, s->count > 2 ? ", ..." : "");
	}
	return dups;
}

/* Compare the log with the list; print the verdict.  The exit status. */
static int audit(const struct auditlog *lg, const struct list *l)
{
	struct table t;
	size_t nprob = 0, bad = 0, present = 0, unknown = 0;
	if (index_list(l, &t)) {
		fprintf(stderr, "listaudit: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < lg->acks.n; i++)
		bad += !check_ack(lg, &lg->acks.v[i], l, &t, &nprob);
	for (size_t i = 0; i < lg->fails.n; i++) {
		const struct entry *f = &lg->fails.v[i];
		struct slot *s = lookup(&t, l, lg->text + f->el.off, f->el.len);
		present += s->first != 0;
		s->logged |= s->first != 0;
	}
	size_t dups = check_duplicates(l, &t, &nprob);
	for (size_t i = 0; i <= t.mask; i++)
		unknown += t.s[i].first && !t.s[i].logged;
	free(t.s);
	if (unknown)
		fprintf(stderr, "listaudit: note: the list holds %zu distinct element(s) that no line of the log names\n",
			unknown);
	if (nprob > MAX_PROBLEMS)
		fprintf(stderr, "listaudit: ... and %zu more problems\n", nprob - MAX_PROBLEMS);
	if (nprob) {
		printf("listaudit: FAILED: %zu missing or misplaced, %zu duplicated\n", bad, dups);
		return 1;
	}
	printf("listaudit: ok: %zu acknowledged elements at their positions (list length %zu, %zu failed requests of "
	       "which %zu present)\n",
	       lg->acks.n, l->n, lg->fails.n, present);
	return 0;
}

static int do_check(const struct opts *o)
{
	struct auditlog lg = { 0 };
	struct list l = { 0 };
	int rc = 1;
	if (read_log(o->log, &lg) == 0 && fetch_list(&o->addrs[0], o->key, &l) == 0)
		rc = audit(&lg, &l);
	fflush(stdout);
	free(lg.text);
	free(lg.acks.v);
	free(lg.fails.v);
	free(l.arena);
	free(l.items);
	return rc;
}

/* ---- arguments ---- */

static const char usage_write[] =
	"usage: listaudit write --addr HOST:PORT [--addr HOST:PORT ...] --log FILE [options]\n"
	"  C connections each RPUSH N unique elements (\"c<client>-<seq>-\" padded with x)\n"
	"  to list K; every acknowledged RPUSH logs \"ack <pos> <element>\" to FILE (pos:\n"
	"  the reply, the list's new length), every request without a good answer in\n"
	"  5 s \"fail <element> <reason>\"; a failed element is never sent again.  After a\n"
	"  failure the client reconnects, trying the --addr list in turn, until S s are over.\n"
	"  --addr HOST:PORT  a replica (repeat for each); only the leader answers\n"
	"  --log FILE        the log to write (truncated first)\n"
	"  --key K           the list (audit:list); use a fresh key for each run\n"
	"  --clients C       concurrent connections (8)\n"
	"  --count N         acknowledged elements per connection (1000)\n"
	"  --size B          bytes per element (100)\n"
	"  --seconds S       stop after S seconds overall (120)\n"
	"Prints \"listaudit: <acked> acked, <failed> failed in <secs> s\".  Exit 0 when\n"
	"every client acked N, 1 when the time ran out first (or SIGTERM), 2 on bad usage.\n";

static const char usage_check[] =
	"usage: listaudit check --addr HOST:PORT --log FILE [--key K]\n"
	"  Reads list K (LRANGE K 0 -1) and the log of a write run, and checks that every\n"
	"  \"ack <pos> <element>\" has that element at that 1-based position, and that no\n"
	"  element appears twice (a failed one may be present, at most once).\n"
	"  --addr HOST:PORT  the server to read, or the path of its unix socket (/...)\n"
	"  --log FILE        the log of listaudit write\n"
	"  --key K           the list (audit:list)\n"
	"Prints \"listaudit: ok: ...\" and exits 0, or prints each problem (the first 20)\n"
	"on stderr, then \"listaudit: FAILED: M missing or misplaced, D duplicated\" and\n"
	"exits 1 (1 also when the log or the server cannot be read); 2 on bad usage.\n";

static const char usage_main[] = "usage: listaudit write|check ... (listaudit write --help, listaudit check --help)\n";

static const char *g_mode_name = "listaudit";

/* Print a one-line error about the arguments and exit 2. */
static __attribute__((noreturn, format(printf, 1, 2))) void bad_arg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", g_mode_name);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see %s --help)\n", g_mode_name);
	exit(2);
}

static uint64_t num_arg(const char *name, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || s[0] == '+' || s[0] == ' ' || v < min || v > max)
		bad_arg("--%s: want an integer in %" PRIu64 "..%" PRIu64 ", got '%s'", name, min, max, s);
	return v;
}

/* Parse --addr s into a: HOST:PORT ([V6]:PORT), or with allow_unix a path. */
static void addr_arg(const char *s, struct addr *a, bool allow_unix)
{
	a->text = s;
	if (allow_unix && s[0] == '/') {
		if (strlen(s) >= sizeof((struct sockaddr_un *)0)->sun_path)
			bad_arg("--addr: socket path too long: '%s'", s);
		snprintf(a->host, sizeof a->host, "%s", s);
		a->port[0] = '\0';
		return;
	}
	const char *colon = strrchr(s, ':');
	size_t hlen = colon ? (size_t)(colon - s) : 0;
	if (hlen >= 2 && s[0] == '[' && s[hlen - 1] == ']') {
		s++;
		hlen -= 2;
	}
	if (!colon || hlen == 0 || hlen >= sizeof a->host)
		bad_arg("--addr: want HOST:PORT%s, got '%s'", allow_unix ? " or a socket path" : "", a->text);
	memcpy(a->host, s, hlen);
	a->host[hlen] = '\0';
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (colon[1] < '1' || colon[1] > '9' || *end || port > 65535)
		bad_arg("--addr: want a port in 1..65535, got '%s'", a->text);
	snprintf(a->port, sizeof a->port, "%lu", port);
}

/* Parse the arguments after the mode into o; exit 2 on anything wrong. */
static void parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option write_opts[] = {
		{ "addr", required_argument, NULL, 'a' },    { "log", required_argument, NULL, 'l' },
		{ "key", required_argument, NULL, 'k' },     { "help", no_argument, NULL, 'H' },
		{ "clients", required_argument, NULL, 'c' }, { "count", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },    { "seconds", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct option check_opts[] = {
		{ "addr", required_argument, NULL, 'a' }, { "log", required_argument, NULL, 'l' },
		{ "key", required_argument, NULL, 'k' },  { "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	bool w = o->mode == WRITE;
	const struct option *opts = w ? write_opts : check_opts;
	int ch, idx = 0, max_addrs = w ? MAX_ADDRS : 1;
	opterr = 0; /* our own one-line messages */
	while ((ch = getopt_long(argc, argv, ":", opts, &idx)) != -1) {
		const char *name = opts[idx].name;
		switch (ch) {
		case 'a':
			if (o->naddrs == max_addrs && w)
				bad_arg("at most %d --addr", MAX_ADDRS);
			if (o->naddrs == max_addrs)
				bad_arg("--addr: check reads one server, give it once");
			addr_arg(optarg, &o->addrs[o->naddrs++], !w);
			break;
		case 'l': o->log = optarg; break;
		case 'k':
			if (!optarg[0])
				bad_arg("--key: want a non-empty key");
			o->key = optarg;
			break;
		case 'c': o->clients = num_arg(name, optarg, 1, 1000); break;
		case 'n': o->count = num_arg(name, optarg, 1, 1000000000); break;
		case 's': o->size = num_arg(name, optarg, 0, MAX_SIZE); break;
		case 'S': o->seconds = num_arg(name, optarg, 1, 10000000); break;
		case 'H': fputs(w ? usage_write : usage_check, stdout); exit(0);
		case ':': bad_arg("missing value for '%s'", argv[optind - 1]);
		default:
			if (optopt)
				bad_arg("unknown option '-%c'", optopt);
			bad_arg("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_arg("unexpected argument '%s'", argv[optind]);
	if (!o->naddrs)
		bad_arg("--addr is required");
	if (!o->log)
		bad_arg("--log is required");
}

int main(int argc, char **argv)
{
	struct opts o = { .key = "audit:list", .clients = 8, .count = 1000, .size = 100, .seconds = 120 };
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		fputs(usage_main, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("%s\n%s", usage_write, usage_check);
		return 0;
	}
	if (strcmp(argv[1], "write") && strcmp(argv[1], "check")) {
		fprintf(stderr, "listaudit: unknown command '%s'; want write or check (see listaudit --help)\n", argv[1]);
		return 2;
	}
	o.mode = argv[1][0] == 'w' ? WRITE : CHECK;
	g_mode_name = o.mode == WRITE ? "listaudit write" : "listaudit check";
	parse_args(argc - 1, argv + 1, &o);
	return o.mode == WRITE ? do_write(&o) : do_check(&o);
}
