/* The node's Prometheus endpoint (metrics.h): one thread, one poll() over
 * the listening socket and a few clients, each with a deadline, so that a
 * client that sends nothing holds a slot for a while and nothing more.
 * Its sockets are created here, inside the server's process, the way the
 * tcp transport's are: the shim passes descriptors it does not track
 * straight through, and this listener is not on the application port. */
#define LOG_PREFIX "metrics: "
#include "coordinator/node/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/logger.h"
#include "common/netaddr.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "common/sys.h"

#define MAX_CLIENTS 8
#define CLIENT_NS (5ULL * 1000000000ULL)	/* whole request and response */
#define REQ_MAX 4096				/* request line and headers */
#define OUT_CAP (64 << 10)
#define TICK_MS 500				/* looks at n->stopping this often */

/* Upper bounds of the commit latency buckets; the last bucket is +Inf. */
static const uint64_t lat_bound_ns[STATUS_LAT_BUCKETS - 1] = {
	50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
	25000000, 50000000, 100000000, 250000000, 500000000, 1000000000,
};
static const char *const lat_bound_label[STATUS_LAT_BUCKETS] = {
	"0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01",
	"0.025", "0.05", "0.1", "0.25", "0.5", "1", "+Inf",
};

void metrics_commit_latency(struct node_status *s, uint64_t ns)
{
	int i = 0;

	while (i < STATUS_LAT_BUCKETS - 1 && ns > lat_bound_ns[i])
		i++;
	status_add(&s->lat_bucket[i], 1);
	status_add(&s->lat_sum_ns, ns);
}

/* --- the text format --- */

struct text {
	char *buf;
	size_t cap, len;
	int full;
	char labels[160];	/* cluster="..",node=".." */
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= t->cap - t->len)
		t->full = 1;
	else
		t->len += (size_t)n;
}

static void head(struct text *t, const char *name, const char *type, const char *help)
{
	put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static uint64_t get(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* A metric with one sample of an unsigned value. */
static void one(struct text *t, const char *name, const char *type, const char *help, uint64_t v)
{
	head(t, name, type, help);
	put(t, "%s{%s} %llu\n", name, t->labels, (unsigned long long)v);
}

static void seconds(struct text *t, const char *name, const char *help, uint64_t ms)
{
	head(t, name, "gauge", help);
	put(t, "%s{%s} %llu.%03llu\n", name, t->labels, (unsigned long long)(ms / 1000),
	    (unsigned long long)(ms % 1000));
}

/* Log bytes this node cannot overwrite yet: the leader's from its reclaim
 * point to its end; a backup's from its recovery point (or a log's length
 * back) to where it has read. */
static uint64_t log_used(const struct node_status *s, uint64_t log_size)
{
	uint64_t end = get(&s->log_pos), from;

	if (s->role == ROLE_LEADER)
		from = get(&s->reclaim_pos);
	else
		from = get(&s->snap_pos);
	if (end > log_size && from < end - log_size)
		from = end - log_size;
	return end > from ? end - from : 0;
}

size_t metrics_render(const struct apus_config *cfg, int self, const struct region_ctl *ctl,
		      char *buf, size_t cap)
{
	static const struct { int role; const char *name; } roles[] = {
		{ ROLE_LEADER, "leader" }, { ROLE_BACKUP, "backup" },
		{ ROLE_CANDIDATE, "candidate" }, { ROLE_DEPOSED, "deposed" },
		{ ROLE_FAILED, "failed" }, { ROLE_REMOVED, "removed" },
	};
	const struct node_status *s = region_status(ctl);
	const struct ckpt_words *ck = &region_mail(ctl)->ckpt;
	struct text t = { buf, cap, 0, 0, "" };
	int role = __atomic_load_n(&s->role, __ATOMIC_RELAXED);
	uint64_t commit = get(&s->commit), applied = get(&s->applied), count = 0;

	if (!cap)
		return 0;
	snprintf(t.labels, sizeof(t.labels), "cluster=\"%s\",node=\"%d\"", cfg->cluster, self);

	head(&t, "apus_role", "gauge", "1 for the role this node has now, 0 for the others.");
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		put(&t, "apus_role{%s,role=\"%s\"} %d\n", t.labels, roles[i].name,
		    role == roles[i].role);
	head(&t, "apus_leader_node", "gauge", "The node this node takes for the leader (-1: none known).");
	put(&t, "apus_leader_node{%s} %d\n", t.labels, __atomic_load_n(&s->leader, __ATOMIC_RELAXED));
	one(&t, "apus_view", "gauge", "The view this node is in.", get(&s->view));
	one(&t, "apus_commit_index", "gauge", "The highest log index this node knows committed.",
	    commit);
	one(&t, "apus_applied_index", "gauge", "The highest log index this node's server executed.",
	    applied);
	one(&t, "apus_lag_entries", "gauge", "Committed entries this node's server has yet to execute.",
	    commit > applied ? commit - applied : 0);
	one(&t, "apus_log_used_bytes", "gauge",
	    "Log bytes that may not be overwritten yet (leader: past the reclaim point; "
	    "backup: past its recovery point).", log_used(s, ctl->log_size));
	one(&t, "apus_log_size_bytes", "gauge", "Size of the circular log.", ctl->log_size);
	one(&t, "apus_proposals_total", "counter", "Events this node appended to the log as leader.",
	    get(&s->proposals));

	head(&t, "apus_commit_latency_seconds", "histogram",
	     "How long the leader's proposals (commit_wait = reply: held replies) waited for their commit.");
	for (int i = 0; i < STATUS_LAT_BUCKETS; i++) {
		count += get(&s->lat_bucket[i]);
		put(&t, "apus_commit_latency_seconds_bucket{%s,le=\"%s\"} %llu\n", t.labels,
		    lat_bound_label[i], (unsigned long long)count);
	}
	uint64_t sum = get(&s->lat_sum_ns);
	put(&t, "apus_commit_latency_seconds_sum{%s} %llu.%09llu\n", t.labels,
	    (unsigned long long)(sum / 1000000000ULL), (unsigned long long)(sum % 1000000000ULL));
	put(&t, "apus_commit_latency_seconds_count{%s} %llu\n", t.labels, (unsigned long long)count);

	one(&t, "apus_elections_won_total", "counter", "Elections this node won.",
	    get(&s->elections_won));
	one(&t, "apus_elections_lost_total", "counter",
	    "Elections this node stood in (past the pre-vote) and did not win.",
	    get(&s->elections_lost));
	one(&t, "apus_leader_changes_total", "counter",
	    "Newer views with a known leader this node saw after the first (failovers).",
	    get(&s->leader_changes));
	one(&t, "apus_checkpoints_total", "counter", "CRIU checkpoints the guard took of this process.",
	    get(&ck->taken));
	seconds(&t, "apus_checkpoint_duration_seconds", "How long the last checkpoint's dump took.",
		get(&ck->dump_ms));
	one(&t, "apus_checkpoint_bytes", "gauge", "Size of the last checkpoint's CRIU images.",
	    get(&ck->image_bytes));
	one(&t, "apus_snapshots_total", "counter", "Snapshots (recovery points) this node took.",
	    get(&s->snap_count));
	seconds(&t, "apus_snapshot_duration_seconds", "How long the last snapshot took.",
		get(&s->snap_ms));
	one(&t, "apus_snapshot_bytes", "gauge", "Size of the last snapshot.", get(&s->snap_bytes));
	one(&t, "apus_snapshot_failures", "gauge",
	    "Snapshots of this node that failed in a row (0 after a success; apus status says why).",
	    s->snap_failures);
	one(&t, "apus_checkpoint_failures", "gauge",
	    "CRIU checkpoints of this node that failed in a row (0 after a success).",
	    get(&ck->failures));
	uint64_t full_ms = get(&s->log_full_ms), now_ms = realtime_ms();
	seconds(&t, "apus_log_full_seconds",
		"Leader: how long writes have waited for log room, that recovery points free (0: they do not wait).",
		full_ms && now_ms > full_ms ? now_ms - full_ms : 0);
	one(&t, "apus_leader_stepdowns_total", "counter",
	    "Times this node stepped down as a new leader that could not execute its log.",
	    get(&s->stepdowns));
	one(&t, "apus_divergences_total", "counter",
	    "Connections whose output on this node differed from the leader's.",
	    get(&s->divergences));
	one(&t, "apus_request_order_stalls_total", "counter",
	    "thread_order = requests: requests that waited past 50 ms, so the next started beside them.",
	    get(&s->order_stalls));
	one(&t, "apus_refused_clients_total", "counter",
	    "Clients of the application port this node turned away (it was no serving leader).",
	    get(&s->refused_clients));
	head(&t, "apus_peer_sent_bytes_total", "counter", "Bytes this node wrote into each peer's region.");
	for (int k = 0; k < cfg->nnodes; k++)
		if (k != self)
			put(&t, "apus_peer_sent_bytes_total{%s,peer=\"%d\"} %llu\n", t.labels, k,
			    (unsigned long long)get(&s->sent_bytes[k]));
	return t.full ? 0 : t.len;
}

/* --- the HTTP side --- */

struct client {
	int fd;			/* -1: free */
	uint64_t deadline;
	size_t inlen;
	char in[REQ_MAX];
	char *out;		/* the response, once the request is whole */
	size_t outlen, outoff;
};

/* The listening socket, for metrics_forget_in_child (one node a process). */
static int metrics_lfd = -1;

void metrics_forget_in_child(void)
{
	if (metrics_lfd >= 0)
		sys.close(metrics_lfd);
}

struct metrics {
	struct node *n;
	int lfd;
	struct client c[MAX_CLIENTS];
	char *body;		/* OUT_CAP bytes */
};

static void client_close(struct client *c)
{
	sys.close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
}

/* The end of the request's headers in C's buffer, or NULL. */
static const char *headers_end(struct client *c)
{
	c->in[c->inlen] = '\0';
	const char *e = strstr(c->in, "\r\n\r\n");
	return e ? e : strstr(c->in, "\n\n");
}

static void respond(struct client *c, int code, const char *reason, const char *type,
		    const char *body, size_t blen)
{
	char hdr[256];
	int h = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n", code, reason, type, blen);

	c->out = malloc((size_t)h + blen);
	if (!c->out) {
		client_close(c);
		return;
	}
	memcpy(c->out, hdr, (size_t)h);
	memcpy(c->out + h, body, blen);
	c->outlen = (size_t)h + blen;
	c->outoff = 0;
}

/* A whole request arrived (or the buffer filled up): answer it. */
static void handle(struct metrics *m, struct client *c, int whole)
{
	static const char text[] = "text/plain; charset=utf-8";
	char method[16], path[256];

	if (!whole || sscanf(c->in, "%15s %255s", method, path) != 2) {
		respond(c, 400, "Bad Request", text, "bad request\n", 12);
		return;
	}
	if (strcmp(method, "GET")) {
		respond(c, 405, "Method Not Allowed", text, "only GET\n", 9);
		return;
	}
	if (strcmp(path, "/metrics") && strncmp(path, "/metrics?", 9)) {
		respond(c, 404, "Not Found", text, "not found: try /metrics\n", 24);
		return;
	}
	size_t len = metrics_render(&m->n->cfg, m->n->self, m->n->ctl, m->body, OUT_CAP);
	if (!len) {
		pr_warn("the metrics outgrew %d bytes", OUT_CAP);
		respond(c, 500, "Internal Server Error", text, "metrics too large\n", 18);
		return;
	}
	respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", m->body, len);
}

/* Reads what C sent; answers once the headers are whole.  Returns -1 when
 * C is done with (closed). */
static int client_read(struct metrics *m, struct client *c)
{
	ssize_t r = sys.recv(c->fd, c->in + c->inlen, sizeof(c->in) - 1 - c->inlen, MSG_DONTWAIT);

	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
		client_close(c);
		return -1;
	}
	if (r > 0)
		c->inlen += (size_t)r;
	if (headers_end(c))
		handle(m, c, 1);
	else if (c->inlen == sizeof(c->in) - 1)
		handle(m, c, 0);
	return c->fd < 0 ? -1 : 0;
}

static void client_write(struct client *c)
{
	/* MSG_NOSIGNAL: a scraper that hung up must not SIGPIPE the server. */
	ssize_t w = sys.send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
			 MSG_DONTWAIT | MSG_NOSIGNAL);

	if (w < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (w > 0)
		c->outoff += (size_t)w;
	if (w < 0 || c->outoff == c->outlen) {
		/* Our FIN first: the client reads to the end, then closes. */
		sys.shutdown(c->fd, SHUT_WR);
		client_close(c);
	}
}

static void accept_clients(struct metrics *m)
{
	for (;;) {
		int fd = sys.accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), i, old = 0;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				/* Out of descriptors, say: the client stays pending and
				 * poll would report it again at once. */
				struct timespec pause = { 0, 100 * 1000000L };

				pr_debug("accept failed: %s", strerror(errno));
				nanosleep(&pause, NULL);
			}
			return;
		}
		/* Full: the client nearest its deadline makes room. */
		for (i = 0; i < MAX_CLIENTS && m->c[i].fd >= 0; i++)
			if (m->c[i].deadline < m->c[old].deadline)
				old = i;
		if (i == MAX_CLIENTS) {
			client_close(&m->c[old]);
			i = old;
		}
		m->c[i] = (struct client){ .fd = fd, .deadline = now_ns() + CLIENT_NS };
	}
}

static void *metrics_main(void *arg)
{
	struct metrics *m = arg;
	struct pollfd p[MAX_CLIENTS + 1];
	int slot[MAX_CLIENTS + 1];
	sigset_t all;

	/* Signals belong to the server's own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!__atomic_load_n(&m->n->stopping, __ATOMIC_RELAXED)) {
		uint64_t now = now_ns(), next = now + TICK_MS * 1000000ULL;
		int np = 1;

		p[0] = (struct pollfd){ m->lfd, POLLIN, 0 };
		for (int i = 0; i < MAX_CLIENTS; i++) {
			struct client *c = &m->c[i];

			if (c->fd < 0)
				continue;
			if (now >= c->deadline) {
				client_close(c);	/* stalled: its slot is worth more */
				continue;
			}
			if (c->deadline < next)
				next = c->deadline;
			p[np] = (struct pollfd){ c->fd, c->out ? POLLOUT : POLLIN, 0 };
			slot[np++] = i;
		}
		int rc = sys.poll(p, (nfds_t)np, (int)((next - now) / 1000000ULL) + 1);
		if (rc < 0 && errno != EINTR) {
			pr_perror("poll failed; the metrics endpoint stops");
			break;
		}
		for (int j = 1; rc > 0 && j < np; j++) {
			struct client *c = &m->c[slot[j]];

			if (!p[j].revents)
				continue;
			if (!c->out && client_read(m, c) < 0)
				continue;
			if (c->out)
				client_write(c);	/* usually all of it at once */
		}
		if (rc > 0 && p[0].revents)
			accept_clients(m);
	}
	return NULL;
}

void metrics_start(struct node *n)
{
	const struct node_conf *nc = &n->cfg.nodes[n->self];
	struct sockaddr_storage ss;
	socklen_t len;
	struct metrics *m;
	pthread_t th;
	int one = 1;

	if (!nc->metrics_port)
		return;
	if (node_sockaddr(nc, nc->metrics_port, &ss, &len)) {
		pr_warn("no metrics endpoint: cannot resolve address '%s'", nc->address);
		return;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pr_warn("no metrics endpoint: out of memory");
		return;
	}
	m->n = n;
	m->lfd = -1;
	for (int i = 0; i < MAX_CLIENTS; i++)
		m->c[i].fd = -1;
	m->body = malloc(OUT_CAP);
	if (!m->body) {
		pr_warn("no metrics endpoint: out of memory");
		goto fail;
	}
	m->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (m->lfd < 0) {
		pr_perror("no metrics endpoint: socket");
		goto fail;
	}
	/* A restarted node rebinds while its predecessor's scrapes linger in TIME_WAIT. */
	setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	metrics_lfd = m->lfd;
	if (bind(m->lfd, (struct sockaddr *)&ss, len) < 0 || sys.listen(m->lfd, 16) < 0) {
		pr_warn("no metrics endpoint: cannot listen on %s:%d: %s (the node runs without one)",
			nc->address, nc->metrics_port, strerror(errno));
		goto fail;
	}
	if (pthread_create(&th, NULL, metrics_main, m)) {
		pr_warn("no metrics endpoint: cannot start its thread");
		goto fail;
	}
	m->n->threads.metrics = th;	/* node_stop joins it */
	m->n->threads.metrics_started = 1;
	pr_info("serving metrics on http://%s:%d/metrics", nc->address, nc->metrics_port);
	return;
fail:
	if (m->lfd >= 0)
		sys.close(m->lfd);
	free(m->body);
	free(m);
}
