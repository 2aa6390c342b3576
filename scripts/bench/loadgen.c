/* loadgen: the closed-loop load generator of the benchmarks (BENCHMARKS.md).
 *
 * C clients, each holding one TCP connection with exactly one request
 * outstanding, all driven by one thread blocked in epoll_wait, until N
 * requests have completed.  Every system compared gets the same client
 * behaviour: Redis (bare or apus-replicated), Redis with WAIT after every
 * write (redis-wait), etcd's v3 JSON gateway over HTTP/1.1 keep-alive, and
 * memcached's text protocol (set/get, apps/memcached/bench.sh).
 *
 * Prints one line of key=value pairs; exits 1 on any error, short WAIT or
 * timeout, 2 on bad arguments. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#define MAX_FAILURES 5		 /* consecutive connection failures before a client gives up */
#define BACKOFF_NS 10000000ull /* first reconnect delay; doubles with each failure */
#define MAX_LINE 65536		 /* longest RESP line or HTTP header block accepted */
#define MAX_DEPTH 8		 /* nesting of RESP arrays */
#define MAX_SIZE (64u << 20)	 /* largest --size */
/* Largest reply buffered, whatever --size: a GET may find values set with
 * another size. Anything announcing more is treated as garbage. */
#define MAX_REPLY (2 * (size_t)MAX_SIZE + (1u << 20))

enum proto { REDIS, REDIS_WAIT, ETCD, MEMCACHED };
enum op { OP_SET, OP_GET };
static const char *const proto_names[] = { "redis", "redis-wait", "etcd", "memcached" };
#define NPROTOS (sizeof proto_names / sizeof *proto_names)
static const char *const op_names[] = { "set", "get" };

struct opts {
	enum proto proto;
	enum op op;
	const char *host, *port;
	const char *cdf;	/* --cdf: where to write the latency distribution */
	const char *prefix;	/* --key-prefix: keys are <prefix>:<k> */
	uint64_t clients, requests, size, keyspace, replicas, timeout_s, seed, wait_timeout_ms;
};

enum cstate { C_BACKOFF, C_CONNECTING, C_READY, C_DEAD };

struct client {
	enum cstate state;
	int fd;
	uint64_t rng;
	int failures;	     /* consecutive, reset by a completed request */
	uint64_t retry_at;   /* C_BACKOFF: when to reconnect */
	bool want_out;	     /* EPOLLOUT registered */
	bool busy;	     /* a request is outstanding */
	int replies_left;    /* replies still to parse for it */
	bool failed;	     /* it got an error reply */
	bool short_wait;     /* its WAIT saw fewer replicas than asked */
	bool server_closes;  /* the HTTP response said Connection: close */
	uint64_t t0;
	char *wbuf;
	size_t wlen, woff;
	char *rbuf;
	size_t rlen, rcap;
};

struct bench {
	const struct opts *o;
	struct addrinfo *ai;
	int epfd;
	char *value; /* what each SET stores: raw for redis, base64 for etcd */
	size_t vlen;
	char hosthdr[300];
	struct client *cl;
	uint64_t *lat; /* ns, one per completed request */
	uint64_t issued, done, errors, short_waits, last_progress;
	uint64_t alive; /* clients not C_DEAD */
	bool requeued;	/* a failed connection handed its request back */
	uint64_t next_retry; /* earliest retry_at of a client in C_BACKOFF */
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t b64_len(size_t n) { return 4 * ((n + 2) / 3); }

static size_t b64_encode(char *dst, const void *src, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = src;
	char *d = dst;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		*d++ = tab[v >> 18];
		*d++ = tab[(v >> 12) & 63];
		*d++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*d++ = i + 2 < n ? tab[v & 63] : '=';
	}
	return (size_t)(d - dst);
}

static bool has_wait(const struct opts *o) { return o->proto == REDIS_WAIT && o->op == OP_SET; }

/* ---- requests ---- */

static void put(char *w, size_t *n, const void *s, size_t len)
{
	memcpy(w + *n, s, len);
	*n += len;
}

static void put_bulk(char *w, size_t *n, const void *s, size_t len)
{
	*n += (size_t)sprintf(w + *n, "$%zu\r\n", len);
	put(w, n, s, len);
	put(w, n, "\r\n", 2);
}

static size_t build_redis(const struct bench *b, char *w, const char *key, size_t klen)
{
	size_t n = 0;
	if (b->o->op == OP_GET) {
		put(w, &n, "*2\r\n$3\r\nGET\r\n", 13);
		put_bulk(w, &n, key, klen);
		return n;
	}
	put(w, &n, "*3\r\n$3\r\nSET\r\n", 13);
	put_bulk(w, &n, key, klen);
	put_bulk(w, &n, b->value, b->vlen);
	if (has_wait(b->o)) {
		/* Pipelined right behind the SET, in the same write, as real clients do. */
		char r[24], t[24];
		int rl = snprintf(r, sizeof r, "%" PRIu64, b->o->replicas);
		int tl = snprintf(t, sizeof t, "%" PRIu64, b->o->wait_timeout_ms);
		put(w, &n, "*3\r\n$4\r\nWAIT\r\n", 14);
		put_bulk(w, &n, r, (size_t)rl);
		put_bulk(w, &n, t, (size_t)tl);
	}
	return n;
}

static size_t build_etcd(const struct bench *b, char *w, const char *key, size_t klen)
{
	bool set = b->o->op == OP_SET;
	char k64[160]; /* base64 of a key of up to 96 bytes */
	size_t k64len = b64_encode(k64, key, klen), n = 0;
	size_t body = 8 + k64len + (set ? 11 + b->vlen : 0) + 2;
	n += (size_t)sprintf(w, "POST /v3/kv/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
				"Content-Length: %zu\r\n\r\n",
			     set ? "put" : "range", b->hosthdr, body);
	put(w, &n, "{\"key\":\"", 8);
	put(w, &n, k64, k64len);
	if (set) {
		put(w, &n, "\",\"value\":\"", 11);
		put(w, &n, b->value, b->vlen);
	}
	put(w, &n, "\"}", 2);
	return n;
}

/* memcached's text protocol: set KEY 0 0 LEN / get KEY. */
static size_t build_memcached(const struct bench *b, char *w, const char *key, size_t klen)
{
	size_t n = 0;
	if (b->o->op == OP_GET) {
		put(w, &n, "get ", 4);
		put(w, &n, key, klen);
		put(w, &n, "\r\n", 2);
		return n;
	}
	put(w, &n, "set ", 4);
	put(w, &n, key, klen);
	n += (size_t)sprintf(w + n, " 0 0 %zu\r\n", b->vlen);
	put(w, &n, b->value, b->vlen);
	put(w, &n, "\r\n", 2);
	return n;
}

/* ---- replies: stateless parsers; an incomplete reply is parsed again from
 * its start when more bytes arrive, which is cheap at these sizes.  Each
 * returns 1 when complete (its length in *used), 0 when more bytes are
 * needed, -1 when malformed. ---- */

/* The length of the line at p without its CRLF, in *len. */
static int find_line(const char *p, size_t len, size_t *linelen)
{
	const char *cr = memchr(p, '\r', len < MAX_LINE ? len : MAX_LINE);
	if (!cr)
		return len >= MAX_LINE ? -1 : 0;
	size_t i = (size_t)(cr - p);
	if (i + 1 >= len)
		return 0;
	if (p[i + 1] != '\n')
		return -1;
	*linelen = i;
	return 1;
}

/* A strict decimal integer of 1 to 18 digits, optionally negative. */
static int parse_ll(const char *p, size_t n, long long *v)
{
	bool neg = n > 0 && p[0] == '-';
	size_t i = neg;
	if (n == i || n - i > 18)
		return -1;
	long long x = 0;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		x = x * 10 + (p[i] - '0');
	}
	*v = neg ? -x : x;
	return 0;
}

/* One RESP2 reply: its type byte in *type, an integer reply's value in *ival. */
static int resp_parse(const char *p, size_t len, size_t *used, char *type, long long *ival, int depth)
{
	size_t n, off;
	long long v;
	int r = len ? find_line(p, len, &n) : 0;
	if (r <= 0)
		return r;
	*type = p[0];
	off = n + 2;
	switch (p[0]) {
	case '+':
	case '-':
		break;
	case ':':
		if (parse_ll(p + 1, n - 1, ival))
			return -1;
		break;
	case '$':
		if (parse_ll(p + 1, n - 1, &v) || v < -1 || v > (long long)MAX_REPLY)
			return -1;
		if (v >= 0) {
			if (len - off < (size_t)v + 2)
				return 0;
			if (p[off + (size_t)v] != '\r' || p[off + (size_t)v + 1] != '\n')
				return -1;
			off += (size_t)v + 2;
		}
		break;
	case '*':
		if (parse_ll(p + 1, n - 1, &v) || v < -1 || depth >= MAX_DEPTH)
			return -1;
		for (long long i = 0; i < v; i++) {
			size_t u;
			char t;
			long long iv;
			if ((r = resp_parse(p + off, len - off, &u, &t, &iv, depth + 1)) <= 0)
				return r;
			off += u;
		}
		break;
	default:
		return -1;
	}
	*used = off;
	return 1;
}

static bool line_is(const char *l, size_t n, const char *s)
{
	size_t k = strlen(s);
	return n >= k && !memcmp(l, s, k) && (n == k || l[k] == ' ');
}

/* One memcached text-protocol reply to a set or a single-key get: STORED,
 * NOT_STORED, END (a miss), VALUE KEY FLAGS LEN [CAS] + data + END, or an
 * error (ERROR, CLIENT_ERROR ..., SERVER_ERROR ...: *failed). */
static int memcached_parse(const char *p, size_t len, size_t *used, bool *failed)
{
	size_t n, off;
	int r = find_line(p, len, &n);
	if (r <= 0)
		return r;
	off = n + 2;
	*failed = false;
	if (line_is(p, n, "STORED") || line_is(p, n, "NOT_STORED") || line_is(p, n, "END")) {
		*used = off;
		return 1;
	}
	if (line_is(p, n, "ERROR") || line_is(p, n, "CLIENT_ERROR") || line_is(p, n, "SERVER_ERROR")) {
		*failed = true;
		*used = off;
		return 1;
	}
	if (!line_is(p, n, "VALUE"))
		return -1;
	/* VALUE key flags bytes [cas]: the length is the fourth word. */
	size_t i = 0, w = 0, ws = 0;
	for (; i <= n && w < 4; i++)
		if (i == n || p[i] == ' ') {
			if (++w < 4)
				ws = i + 1;
		}
	long long v;
	if (w < 4 || parse_ll(p + ws, i - 1 - ws, &v) || v < 0 || v > (long long)MAX_REPLY)
		return -1;
	if (len - off < (size_t)v + 2)
		return 0;
	if (p[off + (size_t)v] != '\r' || p[off + (size_t)v + 1] != '\n')
		return -1;
	off += (size_t)v + 2;
	if ((r = find_line(p + off, len - off, &n)) <= 0)
		return r;
	if (!line_is(p + off, n, "END") || n != 3)
		return -1;
	*used = off + n + 2;
	return 1;
}

/* Whether header line l (n bytes) is NAME; its value in *val, *vlen. */
static bool header_is(const char *l, size_t n, const char *name, const char **val, size_t *vlen)
{
	size_t k = strlen(name);
	if (n <= k || strncasecmp(l, name, k) || l[k] != ':')
		return false;
	for (k++; k < n && (l[k] == ' ' || l[k] == '\t'); k++)
		;
	for (; n > k && (l[n - 1] == ' ' || l[n - 1] == '\t'); n--)
		;
	*val = l + k;
	*vlen = n - k;
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20; /* lower case */
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A chunked body, up to and including its trailers' empty line. */
static int chunked_parse(const char *p, size_t len, size_t *used)
{
	size_t off = 0, n;
	int r;
	for (;;) {
		if ((r = find_line(p + off, len - off, &n)) <= 0)
			return r;
		size_t sz = 0, i;
		for (i = 0; i < n && i < 15 && hexval(p[off + i]) >= 0; i++)
			sz = sz * 16 + (size_t)hexval(p[off + i]);
		/* The size may be followed by extensions, which we ignore. */
		if (i == 0 || sz > MAX_REPLY || (i < n && p[off + i] != ';' && p[off + i] != ' '))
			return -1;
		off += n + 2;
		if (sz == 0)
			break;
		if (len - off < sz + 2)
			return 0;
		if (p[off + sz] != '\r' || p[off + sz + 1] != '\n')
			return -1;
		off += sz + 2;
	}
	do {
		if ((r = find_line(p + off, len - off, &n)) <= 0)
			return r;
		off += n + 2;
	} while (n > 0);
	*used = off;
	return 1;
}

/* One HTTP/1.x response: its status in *status, whether the server closes
 * the connection after it in *closes. */
static int http_parse(const char *p, size_t len, size_t *used, int *status, bool *closes)
{
	const char *end = memmem(p, len < MAX_LINE ? len : MAX_LINE, "\r\n\r\n", 4), *v;
	if (!end)
		return len >= MAX_LINE ? -1 : 0;
	size_t hlen = (size_t)(end - p) + 4, vlen, body;
	if (hlen < 16 || memcmp(p, "HTTP/1.", 7) || p[8] != ' ')
		return -1;
	for (int i = 9; i < 12; i++)
		if (p[i] < '0' || p[i] > '9')
			return -1;
	*status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	*closes = p[7] == '0';
	long long clen = -1;
	bool chunked = false;
	/* Header lines lie between the status line and the final empty line. */
	for (const char *l = (const char *)memchr(p, '\n', hlen) + 1; l < end + 2;) {
		const char *eol = memchr(l, '\r', (size_t)(end + 2 - l));
		size_t n = (size_t)(eol - l);
		if (header_is(l, n, "content-length", &v, &vlen)) {
			if (parse_ll(v, vlen, &clen) || clen < 0 || clen > (long long)MAX_REPLY)
				return -1;
		} else if (header_is(l, n, "transfer-encoding", &v, &vlen)) {
			chunked = vlen >= 7 && !strncasecmp(v + vlen - 7, "chunked", 7);
		} else if (header_is(l, n, "connection", &v, &vlen)) {
			*closes = vlen == 5 && !strncasecmp(v, "close", 5);
		}
		l = eol + 2;
	}
	if (*status / 100 == 1 || *status == 204 || *status == 304) {
		body = 0;
	} else if (chunked) {
		int r = chunked_parse(p + hlen, len - hlen, &body);
		if (r <= 0)
			return r;
	} else if (clen >= 0) {
		body = (size_t)clen;
		if (len - hlen < body)
			return 0;
	} else {
		return -1; /* a body delimited by the close: not what a gateway sends */
	}
	*used = hlen + body;
	return 1;
}

/* ---- connections ---- */

static void set_out(struct bench *b, struct client *c, bool want)
{
	if (want == c->want_out)
		return;
	struct epoll_event ev = { .events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c };
	epoll_ctl(b->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	c->want_out = want;
}

static int flush(struct bench *b, struct client *c)
{
	while (c->woff < c->wlen) {
		ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0)
			return -1;
		c->woff += (size_t)n;
	}
	set_out(b, c, c->woff < c->wlen);
	return 0;
}

static int start_request(struct bench *b, struct client *c)
{
	char key[96];
	/* Uniform in [0, K) without the bias of a modulo. */
	uint64_t k = (uint64_t)(((unsigned __int128)splitmix64(&c->rng) * b->o->keyspace) >> 64);
	size_t klen = (size_t)snprintf(key, sizeof key, "%s:%" PRIu64, b->o->prefix, k);
	c->wlen = b->o->proto == ETCD	     ? build_etcd(b, c->wbuf, key, klen)
		  : b->o->proto == MEMCACHED ? build_memcached(b, c->wbuf, key, klen)
					     : build_redis(b, c->wbuf, key, klen);
	c->woff = 0;
	c->busy = true;
	c->replies_left = has_wait(b->o) ? 2 : 1;
	c->failed = c->short_wait = false;
	b->issued++;
	c->t0 = now_ns();
	return flush(b, c);
}

/* Drop c's connection; with error, count it and back off before the next
 * attempt.  An outstanding request goes back to be issued again. */
static void client_fail(struct bench *b, struct client *c, bool error)
{
	if (c->fd >= 0)
		close(c->fd); /* also removes it from the epoll set */
	c->fd = -1;
	c->rlen = 0;
	c->want_out = c->server_closes = false;
	if (c->busy) {
		c->busy = false;
		b->issued--;
		b->requeued = true;
	}
	if (error) {
		b->errors++;
		if (++c->failures >= MAX_FAILURES) {
			c->state = C_DEAD;
			b->alive--;
			return;
		}
	}
	c->state = C_BACKOFF;
	c->retry_at = now_ns() + (error ? BACKOFF_NS << (c->failures - 1) : 0);
	if (c->retry_at < b->next_retry)
		b->next_retry = c->retry_at;
}

static void client_connect(struct bench *b, struct client *c)
{
	const struct addrinfo *ai = b->ai;
	int one = 1, fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	c->fd = fd;
	if (fd < 0) {
		client_fail(b, c, true);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		client_fail(b, c, true);
		return;
	}
	/* Connected once writable, even when connect() finished at once. */
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
	if (epoll_ctl(b->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		client_fail(b, c, true);
		return;
	}
	c->want_out = true;
	c->state = C_CONNECTING;
}

static void complete(struct bench *b, struct client *c)
{
	uint64_t t = now_ns();
	b->lat[b->done++] = t - c->t0;
	b->last_progress = t;
	b->errors += c->failed;
	b->short_waits += c->short_wait;
	c->busy = false;
	c->failures = 0;
}

static int resp_reply(struct bench *b, struct client *c, const char *p, size_t len, size_t *used)
{
	char t;
	long long v = 0;
	int r = resp_parse(p, len, used, &t, &v, 0);
	if (r <= 0)
		return r;
	if (t == '-') {
		c->failed = true;
	} else if (c->replies_left == 1 && has_wait(b->o)) {
		if (t != ':')
			return -1;
		c->short_wait = v < (long long)b->o->replicas;
	}
	if (--c->replies_left == 0)
		complete(b, c);
	return 1;
}

static int http_reply(struct bench *b, struct client *c, const char *p, size_t len, size_t *used)
{
	int status;
	bool closes;
	int r = http_parse(p, len, used, &status, &closes);
	if (r <= 0 || status / 100 == 1) /* 1xx: interim, the real one follows */
		return r;
	c->failed = status / 100 != 2;
	c->server_closes = closes;
	complete(b, c);
	return 1;
}

static int memcached_reply(struct bench *b, struct client *c, const char *p, size_t len, size_t *used)
{
	bool failed;
	int r = memcached_parse(p, len, used, &failed);
	if (r <= 0)
		return r;
	c->failed = failed;
	complete(b, c);
	return 1;
}

/* Read what arrived and account for every complete reply in it. */
static int on_readable(struct bench *b, struct client *c)
{
	if (c->rcap - c->rlen < 4096 && c->rcap < MAX_REPLY) {
		size_t cap = c->rcap * 2 < MAX_REPLY ? c->rcap * 2 : MAX_REPLY;
		char *p = realloc(c->rbuf, cap);
		if (!p)
			return -1;
		c->rbuf = p;
		c->rcap = cap;
	}
	if (c->rlen == c->rcap)
		return -1; /* a reply larger than any we expect */
	ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (n <= 0)
		return -1;
	c->rlen += (size_t)n;
	size_t off = 0, used;
	while (off < c->rlen) {
		if (!c->busy)
			return -1; /* bytes nobody asked for */
		int r = b->o->proto == ETCD	       ? http_reply(b, c, c->rbuf + off, c->rlen - off, &used)
			: b->o->proto == MEMCACHED ? memcached_reply(b, c, c->rbuf + off, c->rlen - off, &used)
						   : resp_reply(b, c, c->rbuf + off, c->rlen - off, &used);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		off += used;
	}
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
	return 0;
}

static void on_event(struct bench *b, struct client *c, uint32_t ev)
{
	int rc = 0;
	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof err;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err) {
			client_fail(b, c, true);
			return;
		}
		c->state = C_READY;
		set_out(b, c, false);
	} else if (c->state != C_READY) {
		return;
	}
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
		rc = on_readable(b, c);
	if (rc == 0 && (ev & EPOLLOUT) && c->busy)
		rc = flush(b, c);
	if (rc == 0 && c->server_closes && !c->busy) {
		client_fail(b, c, false); /* reconnect at once: not an error */
		return;
	}
	if (rc == 0 && !c->busy && b->issued < b->o->requests)
		rc = start_request(b, c);
	if (rc < 0)
		client_fail(b, c, true);
}

/* Reconnect the clients whose back-off is over, hand requeued requests to
 * idle clients.  Only then is every client looked at. */
static void tend_clients(struct bench *b, uint64_t now)
{
	if (!b->requeued && now < b->next_retry)
		return;
	uint64_t next = UINT64_MAX;
	bool requeued = b->requeued;
	b->requeued = false;
	for (uint64_t i = 0; i < b->o->clients; i++) {
		struct client *c = &b->cl[i];
		if (c->state == C_BACKOFF && c->retry_at <= now)
			client_connect(b, c);
		else if (requeued && c->state == C_READY && !c->busy && b->issued < b->o->requests &&
			 start_request(b, c) < 0)
			client_fail(b, c, true);
		if (c->state == C_BACKOFF && c->retry_at < next)
			next = c->retry_at;
	}
	b->next_retry = next;
}

/* ---- the run ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile q/100000 of the sorted v, in microseconds. */
static double pct_us(const uint64_t *v, uint64_t n, uint64_t q)
{
	if (n == 0)
		return 0;
	uint64_t r = (n * q + 99999) / 100000;
	return (double)v[r ? r - 1 : 0] / 1000.0;
}

/* "latency_us fraction" lines (1000 quantiles and the max): a CDF to plot. */
static int write_cdf(const char *path, const uint64_t *v, uint64_t n)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "loadgen: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (uint64_t q = 100; q <= 100000 && n; q += 100)
		fprintf(f, "%.1f %.4f\n", pct_us(v, n, q), (double)q / 100000.0);
	return fclose(f) ? 1 : 0;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p) {
		fprintf(stderr, "loadgen: out of memory\n");
		exit(1);
	}
	return p;
}

static int run(const struct opts *o, struct addrinfo *ai)
{
	struct bench b = { .o = o, .ai = ai, .alive = o->clients, .next_retry = UINT64_MAX };
	const char *br = strchr(o->host, ':') ? "[" : "";
	snprintf(b.hosthdr, sizeof b.hosthdr, "%s%s%s:%s", br, o->host, *br ? "]" : "", o->port);
	char *raw = xcalloc(1, o->size);
	memset(raw, 'x', o->size);
	if (o->proto == ETCD) {
		b.value = xcalloc(1, b64_len(o->size));
		b.vlen = b64_encode(b.value, raw, o->size);
		free(raw);
	} else {
		b.value = raw;
		b.vlen = o->size;
	}
	size_t wcap = b.vlen + 512 + sizeof b.hosthdr;
	b.lat = xcalloc(o->requests, sizeof *b.lat);
	b.cl = xcalloc(o->clients, sizeof *b.cl);
	if ((b.epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		perror("loadgen: epoll_create1");
		return 1;
	}

	uint64_t start = now_ns();
	b.last_progress = start;
	for (uint64_t i = 0; i < o->clients; i++) {
		struct client *c = &b.cl[i];
		uint64_t s = o->seed + i * 0xd1b54a32d192ed03ull; /* distinct stream per client */
		c->rng = splitmix64(&s);
		c->wbuf = xcalloc(1, wcap);
		c->rcap = 16384;
		c->rbuf = xcalloc(1, c->rcap);
		c->fd = -1;
		client_connect(&b, c);
	}

	const uint64_t timeout = o->timeout_s * 1000000000ull;
	bool timed_out = false;
	struct epoll_event evs[256];
	while (b.done < o->requests && b.alive > 0) {
		uint64_t now = now_ns();
		if (now - b.last_progress >= timeout) {
			timed_out = true;
			break;
		}
		tend_clients(&b, now);
		uint64_t wake = b.last_progress + timeout < b.next_retry ? b.last_progress + timeout : b.next_retry;
		uint64_t ms = wake > now ? (wake - now + 999999) / 1000000 : 0;
		int n = epoll_wait(b.epfd, evs, (int)(sizeof evs / sizeof *evs), ms > 60000 ? 60000 : (int)ms);
		if (n < 0 && errno != EINTR) {
			perror("loadgen: epoll_wait");
			return 1;
		}
		for (int i = 0; i < n; i++)
			on_event(&b, evs[i].data.ptr, evs[i].events);
	}
	double secs = (double)(now_ns() - start) / 1e9;

	if (b.done < o->requests)
		fprintf(stderr, "loadgen: %s; stopping after %" PRIu64 " of %" PRIu64 " requests\n",
			timed_out ? "nothing completed for --timeout-s" : "every client's connection failed repeatedly",
			b.done, o->requests);
	qsort(b.lat, b.done, sizeof *b.lat, cmp_u64);
	printf("proto=%s op=%s clients=%" PRIu64 " size=%" PRIu64 " n=%" PRIu64 " secs=%.3f rps=%.0f",
	       proto_names[o->proto], op_names[o->op], o->clients, o->size, b.done, secs,
	       secs > 0 ? (double)b.done / secs : 0);
	printf(" p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f errors=%" PRIu64 " short_waits=%" PRIu64 "\n",
	       pct_us(b.lat, b.done, 50000), pct_us(b.lat, b.done, 99000), pct_us(b.lat, b.done, 99900),
	       pct_us(b.lat, b.done, 100000), b.errors, b.short_waits);
	fflush(stdout);
	if (o->cdf && write_cdf(o->cdf, b.lat, b.done))
		return 1;

	for (uint64_t i = 0; i < o->clients; i++) {
		if (b.cl[i].fd >= 0)
			close(b.cl[i].fd);
		free(b.cl[i].wbuf);
		free(b.cl[i].rbuf);
	}
	free(b.cl);
	free(b.lat);
	free(b.value);
	close(b.epfd);
	return b.done == o->requests && !timed_out && b.errors == 0 && b.short_waits == 0 ? 0 : 1;
}

/* ---- arguments ---- */

static const char usage[] =
	"usage: loadgen --proto redis|redis-wait|etcd|memcached --host H --port P [options]\n"
	"  --clients C          connections, each with one request outstanding (50)\n"
	"  --requests N         requests to complete over all clients (100000)\n"
	"  --op set|get         SET or GET; etcd: put or range; memcached: set or get (set)\n"
	"  --size BYTES         value size of a set (64)\n"
	"  --keyspace K         keys key:0 .. key:K-1, picked uniformly (100000)\n"
	"  --key-prefix P       keys P:0 .. P:K-1 instead (at most 64 bytes)\n"
	"  --replicas R         redis-wait: WAIT R 0 pipelined behind each SET (2)\n"
	"  --timeout-s S        stop when nothing completes for S seconds (120)\n"
	"  --seed X             seed of the clients' key choices (1)\n"
	"  --cdf FILE           also write the latency CDF (\"latency_us fraction\" lines)\n"
	"  --wait-timeout-ms MS redis-wait, for tests: WAIT R MS instead of WAIT R 0 (0)\n"
	"Prints one line: proto= op= clients= size= n= secs= rps= p50_us= p99_us= p999_us=\n"
	"max_us= errors= short_waits=. Exit 0 when all N requests succeeded, 1 otherwise.\n";

static __attribute__((noreturn, format(printf, 1, 2))) void bad_arg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("loadgen: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nusage: loadgen --proto redis|redis-wait|etcd|memcached --host H --port P [options] (see --help)\n",
	      stderr);
	exit(2);
}

static uint64_t num_arg(const char *name, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		bad_arg("--%s: want an integer in %" PRIu64 "..%" PRIu64 ", got '%s'", name, min, max, s);
	return v;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "proto", required_argument, NULL, 'P' },  { "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },   { "clients", required_argument, NULL, 'c' },
		{ "requests", required_argument, NULL, 'n' }, { "op", required_argument, NULL, 'o' },
		{ "size", required_argument, NULL, 's' },   { "keyspace", required_argument, NULL, 'k' },
		{ "replicas", required_argument, NULL, 'r' }, { "timeout-s", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, 'S' },   { "cdf", required_argument, NULL, 'C' },   { "wait-timeout-ms", required_argument, NULL, 'W' },
		{ "key-prefix", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'H' },	    { NULL, 0, NULL, 0 },
	};
	*o = (struct opts){ .proto = (enum proto)-1, .clients = 50, .requests = 100000, .size = 64,
			    .keyspace = 100000, .replicas = 2, .timeout_s = 120, .seed = 1, .prefix = "key" };
	int ch, idx;
	opterr = 0; /* our own one-line message */
	while ((ch = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		const char *name = ch == '?' ? NULL : longopts[idx].name;
		switch (ch) {
		case 'P':
			for (size_t i = 0; i < NPROTOS; i++)
				if (!strcmp(optarg, proto_names[i]))
					o->proto = (enum proto)i;
			if (o->proto == (enum proto)-1)
				bad_arg("--proto: want redis, redis-wait, etcd or memcached, got '%s'", optarg);
			break;
		case 'o':
			if (strcmp(optarg, "set") && strcmp(optarg, "get"))
				bad_arg("--op: want set or get, got '%s'", optarg);
			o->op = optarg[0] == 's' ? OP_SET : OP_GET;
			break;
		case 'h': o->host = optarg; break;
		case 'p': num_arg(name, optarg, 1, 65535); o->port = optarg; break;
		case 'c': o->clients = num_arg(name, optarg, 1, 100000); break;
		case 'n': o->requests = num_arg(name, optarg, 1, 1000000000); break;
		case 's': o->size = num_arg(name, optarg, 0, MAX_SIZE); break;
		case 'k': o->keyspace = num_arg(name, optarg, 1, UINT64_MAX); break;
		case 'r': o->replicas = num_arg(name, optarg, 0, 1000000); break;
		case 't': o->timeout_s = num_arg(name, optarg, 1, 1000000); break;
		case 'S': o->seed = num_arg(name, optarg, 0, UINT64_MAX); break;
		case 'C': o->cdf = optarg; break;
		case 'K':
			if (!*optarg || strlen(optarg) > 64 || strpbrk(optarg, " \t\r\n"))
				bad_arg("--key-prefix: want 1 to 64 bytes without blanks, got '%s'", optarg);
			o->prefix = optarg;
			break;
		case 'W': o->wait_timeout_ms = num_arg(name, optarg, 0, 1000000000); break;
		case 'H': fputs(usage, stdout); exit(0);
		default: bad_arg("%s '%s'", optopt ? "missing value for" : "unknown option", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_arg("unexpected argument '%s'", argv[optind]);
	if (o->proto == (enum proto)-1 || !o->host || !o->port)
		bad_arg("%s is required", o->proto == (enum proto)-1 ? "--proto" : !o->host ? "--host" : "--port");
}

int main(int argc, char **argv)
{
	struct opts o;
	parse_args(argc, argv, &o);

	/* One descriptor per client: raise the soft limit as far as allowed. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < o.clients + 64 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = o.clients + 64 < rl.rlim_max ? o.clients + 64 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	int rc = getaddrinfo(o.host, o.port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "loadgen: %s:%s: %s\n", o.host, o.port, gai_strerror(rc));
		return 2;
	}
	rc = run(&o, ai);
	freeaddrinfo(ai);
	return rc;
}
