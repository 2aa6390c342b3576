#include "common/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sys.h"

static const char *const fsync_names[] = { "none", "batch", "always" };
static const char *const transport_names[] = { "shm", "tcp", "rdma" };
static const char *const commit_wait_names[] = { "read", "reply" };
static const char *const on_off_names[] = { "off", "on" };
static const char *const greeting_names[] = { "compare", "skip" };
static const char *const divergence_names[] = { "report", "unhealthy", "repair" };
static const char *const randomness_names[] = { "log", "machine" };
static const char *const thread_order_names[] = { "reads", "requests" };
static const char *const member_names[] = { "voter", "learner", "removed" };
static const char *const snapshot_connections_names[] = { "any", "none", "stateless" };

const char *member_role_name(int member)
{
	return member >= 0 && member <= MEMBER_REMOVED ? member_names[member] : "?";
}

const char *fsync_policy_name(int policy)
{
	return policy >= 0 && policy <= FSYNC_ALWAYS ? fsync_names[policy] : "?";
}

struct parser {
	const char *path;
	int line;
	char *err;
	size_t errlen;
};

static int fail(struct parser *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->line > 0)
		n = snprintf(p->err, p->errlen, "%s:%d: ", p->path, p->line);
	else
		n = snprintf(p->err, p->errlen, "%s: ", p->path);
	if (n < 0 || (size_t)n >= p->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - n, fmt, ap);
	va_end(ap);
	return -1;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Size with an optional K/M/G suffix (powers of two). */
static int parse_size(struct parser *p, const char *key, const char *v, uint64_t *out)
{
	char *end;
	unsigned long long n;
	uint64_t mult = 1;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (end == v || errno || *v == '-')
		return fail(p, "%s: '%s' is not a size (e.g. 64M)", key, v);
	switch (toupper((unsigned char)*end)) {
	case 'K': mult = 1ULL << 10; end++; break;
	case 'M': mult = 1ULL << 20; end++; break;
	case 'G': mult = 1ULL << 30; end++; break;
	}
	if (toupper((unsigned char)*end) == 'B')
		end++;
	if (*end)
		return fail(p, "%s: '%s' is not a size (e.g. 64M)", key, v);
	if (n > UINT64_MAX / mult)
		return fail(p, "%s: '%s' is too large", key, v);
	*out = n * mult;
	return 0;
}

static int parse_int(struct parser *p, const char *key, const char *v, long lo, long hi, int *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (end == v || *end || errno)
		return fail(p, "%s: '%s' is not a number", key, v);
	if (n < lo || n > hi)
		return fail(p, "%s: %ld is out of range [%ld, %ld]", key, n, lo, hi);
	*out = (int)n;
	return 0;
}

static int parse_name(struct parser *p, const char *key, const char *v,
		      const char *const *names, int count, int *out)
{
	for (int i = 0; i < count; i++) {
		if (!strcmp(v, names[i])) {
			*out = i;
			return 0;
		}
	}
	if (count == 3)
		return fail(p, "%s: '%s' is not one of %s, %s, %s", key, v,
			    names[0], names[1], names[2]);
	if (count == 2)
		return fail(p, "%s: '%s' is not one of %s, %s", key, v, names[0], names[1]);
	return fail(p, "%s: bad value '%s'", key, v);
}

static int copy_str(struct parser *p, const char *key, const char *v, char *dst, size_t cap)
{
	if (strlen(v) >= cap)
		return fail(p, "%s: value longer than %zu characters", key, cap - 1);
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

/* A set_*_key() helper's answer for a key of another topic: set_global()
 * asks the next one (0 and -1 are the parse's own answers). */
#define OTHER_TOPIC 1

/* The cluster's identity and where its nodes meet: names, transport, ports,
 * the files they share, and how soon a silent peer counts as gone. */
static int set_cluster_key(struct parser *p, struct apus_config *c, const char *k,
			   const char *v, int *default_port, int *default_metrics)
{
	int i;

	if (!strcmp(k, "cluster")) {
		for (const char *s = v; *s; s++)
			if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_')
				return fail(p, "cluster: '%s' may hold only letters, digits, '-' and '_'", v);
		return copy_str(p, k, v, c->cluster, sizeof(c->cluster));
	}
	if (!strcmp(k, "transport")) {
		if (parse_name(p, k, v, transport_names, 3, &i))
			return -1;
		return copy_str(p, k, v, c->transport, sizeof(c->transport));
	}
	if (!strcmp(k, "heartbeat_ms"))
		return parse_int(p, k, v, 1, 10000, &c->heartbeat_ms);
	if (!strcmp(k, "suspect_ms")) {
		if (parse_int(p, k, v, 1, 600000, &c->suspect_ms))
			return -1;
		c->suspect_line = p->line;
		return 0;
	}
	if (!strcmp(k, "start_timeout_ms"))
		return parse_int(p, k, v, 100, 600000, &c->start_timeout_ms);
	if (!strcmp(k, "region_dir")) {
		if (strcmp(v, "none") && v[0] != '/') {
			fail(p, "region_dir '%s' must be an absolute directory or 'none'", v);
			return -1;
		}
		return copy_str(p, k, v, c->region_dir, sizeof(c->region_dir));
	}
	/* Defaults for the [node N] sections, which may name their own. */
	if (!strcmp(k, "app_port"))
		return parse_int(p, k, v, 1, 65535, default_port);
	if (!strcmp(k, "metrics_port"))
		return parse_int(p, k, v, 1, 65535, default_metrics);
	if (!strcmp(k, "secret_file"))
		return copy_str(p, k, v, c->secret_file, sizeof(c->secret_file));
	if (!strcmp(k, "run_dir"))
		return copy_str(p, k, v, c->run_dir, sizeof(c->run_dir));
	return OTHER_TOPIC;
}

/* The log: its size, its largest entry, and when it reaches the disk. */
static int set_log_key(struct parser *p, struct apus_config *c, const char *k, const char *v)
{
	uint64_t sz;

	if (!strcmp(k, "log_size")) {
		if (parse_size(p, k, v, &sz))
			return -1;
		if (sz < (64 << 10) || sz > (64ULL << 30))
			return fail(p, "log_size: %s is out of range [64K, 64G]", v);
		c->log_size = sz & ~4095ULL;
		return 0;
	}
	if (!strcmp(k, "max_entry")) {
		if (parse_size(p, k, v, &sz))
			return -1;
		if (sz < 1024 || sz > (16 << 20))
			return fail(p, "max_entry: %s is out of range [1K, 16M]", v);
		c->max_entry = (uint32_t)sz;
		return 0;
	}
	if (!strcmp(k, "fsync"))
		return parse_name(p, k, v, fsync_names, 3, &c->fsync);
	if (!strcmp(k, "fsync_interval_ms"))
		return parse_int(p, k, v, 1, 60000, &c->fsync_interval_ms);
	if (!strcmp(k, "commit_wait"))
		return parse_name(p, k, v, commit_wait_names, 2, &c->commit_wait);
	return OTHER_TOPIC;
}

/* How the replicas stay the same: replay, the checker, divergence and its
 * repair, and the randomness a server draws. */
static int set_replay_key(struct parser *p, struct apus_config *c, const char *k, const char *v)
{
	if (!strcmp(k, "checker"))
		return parse_name(p, k, v, on_off_names, 2, &c->checker);
	if (!strcmp(k, "checker_greeting"))
		return parse_name(p, k, v, greeting_names, 2, &c->checker_greeting);
	if (!strcmp(k, "read_ahead"))
		return parse_name(p, k, v, on_off_names, 2, &c->read_ahead);
	if (!strcmp(k, "replay_in_place"))
		return parse_name(p, k, v, on_off_names, 2, &c->replay_in_place);
	if (!strcmp(k, "thread_order"))
		return parse_name(p, k, v, thread_order_names, 2, &c->thread_order);
	if (!strcmp(k, "divergence"))
		return parse_name(p, k, v, divergence_names, 3, &c->divergence);
	if (!strcmp(k, "repair_interval_s"))
		return parse_int(p, k, v, 1, 1000000, &c->repair_interval_s);
	if (!strcmp(k, "randomness"))
		return parse_name(p, k, v, randomness_names, 2, &c->randomness);
	if (!strcmp(k, "seed_function")) {
		for (const char *q = v; *q; q++)
			if (!(*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
			      (q > v && *q >= '0' && *q <= '9')))
				return fail(p, "seed_function '%s' is not a C function name", v);
		return copy_str(p, k, v, c->seed_function, sizeof(c->seed_function));
	}
	if (!strcmp(k, "seed_every"))
		return parse_int(p, k, v, 1, 1000000000, &c->seed_every);
	return OTHER_TOPIC;
}

/* Recovery points: the guard's CRIU checkpoints and the nodes' own
 * snapshots, how often each is taken and how old one may grow. */
static int set_recovery_key(struct parser *p, struct apus_config *c, const char *k,
			    const char *v)
{
	uint64_t sz;

	if (!strcmp(k, "guard"))
		return parse_name(p, k, v, on_off_names, 2, &c->guard);
	if (!strcmp(k, "checkpoint_keep"))
		return parse_int(p, k, v, 1, 32, &c->checkpoint_keep);
	if (!strcmp(k, "checkpoint_interval_s"))
		return parse_int(p, k, v, 0, 1000000, &c->checkpoint_interval_s);
	if (!strcmp(k, "checkpoint_entries")) {
		int e;
		if (parse_int(p, k, v, 0, 2000000000, &e))
			return -1;
		c->checkpoint_entries = (uint64_t)e;
		return 0;
	}
	if (!strcmp(k, "recovery_point_max_age_s"))
		return parse_int(p, k, v, 0, 100000000, &c->recovery_point_max_age_s);
	if (!strcmp(k, "snapshot_leader"))
		return parse_name(p, k, v, on_off_names, 2, &c->snapshot_leader);
	if (!strcmp(k, "snapshot_connections"))
		return parse_name(p, k, v, snapshot_connections_names, 3,
				  &c->snapshot_connections);
	if (!strcmp(k, "snapshot_interval_s"))
		return parse_int(p, k, v, 0, 1000000, &c->snapshot_interval_s);
	if (!strcmp(k, "snapshot_log_bytes")) {
		if (parse_size(p, k, v, &sz))
			return -1;
		if (sz < 4096)
			return fail(p, "snapshot_log_bytes: %s is below 4K", v);
		c->snapshot_log_bytes = sz;
		return 0;
	}
	if (!strcmp(k, "snapshot_file")) {
		if (!*v || strchr(v, '/') || !strncmp(v, "apus.", 5) || !strcmp(v, ".") ||
		    !strcmp(v, "..")) {
			fail(p, "snapshot_file '%s' must be a file name inside data_dir (no '/', not "
				"apus.*)", v);
			return -1;
		}
		return copy_str(p, k, v, c->snapshot_file, sizeof(c->snapshot_file));
	}
	return OTHER_TOPIC;
}

/* The commands that start, reset, snapshot, load and check the server,
 * and the hook run on leadership. */
static int set_app_key(struct parser *p, struct apus_config *c, const char *k, const char *v)
{
	if (!strcmp(k, "app_cmd"))
		return copy_str(p, k, v, c->app_cmd, sizeof(c->app_cmd));
	if (!strcmp(k, "app_reset_cmd"))
		return copy_str(p, k, v, c->app_reset_cmd, sizeof(c->app_reset_cmd));
	if (!strcmp(k, "snapshot_cmd"))
		return copy_str(p, k, v, c->snapshot_cmd, sizeof(c->snapshot_cmd));
	if (!strcmp(k, "snapshot_load_cmd"))
		return copy_str(p, k, v, c->snapshot_load_cmd, sizeof(c->snapshot_load_cmd));
	if (!strcmp(k, "verify_cmd"))
		return copy_str(p, k, v, c->verify_cmd, sizeof(c->verify_cmd));
	if (!strcmp(k, "leader_hook"))
		return copy_str(p, k, v, c->leader_hook, sizeof(c->leader_hook));
	return OTHER_TOPIC;
}

/* A key outside any [node N] section: each topic's helper in turn. */
static int set_global(struct parser *p, struct apus_config *c, const char *k, const char *v,
		      int *default_port, int *default_metrics)
{
	int rc = set_cluster_key(p, c, k, v, default_port, default_metrics);

	if (rc == OTHER_TOPIC)
		rc = set_log_key(p, c, k, v);
	if (rc == OTHER_TOPIC)
		rc = set_replay_key(p, c, k, v);
	if (rc == OTHER_TOPIC)
		rc = set_recovery_key(p, c, k, v);
	if (rc == OTHER_TOPIC)
		rc = set_app_key(p, c, k, v);
	if (rc == OTHER_TOPIC)
		return fail(p, "unknown key '%s'", k);
	return rc;
}

static int set_node(struct parser *p, struct node_conf *n, const char *k, const char *v)
{
	if (!strcmp(k, "address"))
		return copy_str(p, k, v, n->address, sizeof(n->address));
	if (!strcmp(k, "app_port"))
		return parse_int(p, k, v, 1, 65535, &n->app_port);
	if (!strcmp(k, "peer_port"))
		return parse_int(p, k, v, 1, 65535, &n->peer_port);
	if (!strcmp(k, "guard_port"))
		return parse_int(p, k, v, 1, 65535, &n->guard_port);
	if (!strcmp(k, "metrics_port"))
		return parse_int(p, k, v, 1, 65535, &n->metrics_port);
	if (!strcmp(k, "data_dir"))
		return copy_str(p, k, v, n->data_dir, sizeof(n->data_dir));
	if (!strcmp(k, "secret_file"))
		return copy_str(p, k, v, n->secret_file, sizeof(n->secret_file));
	if (!strcmp(k, "run_dir"))
		return copy_str(p, k, v, n->run_dir, sizeof(n->run_dir));
	if (!strcmp(k, "member"))
		return parse_name(p, k, v, member_names, 3, &n->member);
	if (!strcmp(k, "replaces"))
		return parse_int(p, k, v, 0, APUS_MAX_NODES - 1, &n->replaces);
	if (!strcmp(k, "netns")) {
		for (const char *s = v; *s; s++)
			if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.')
				return fail(p, "netns: '%s' is not a namespace name", v);
		return copy_str(p, k, v, n->netns, sizeof(n->netns));
	}
	return fail(p, "unknown key '%s' in [node %d]", k, n->id);
}

/* Relative paths (data_dir, secret_file) are resolved against the config file's folder. */
static int resolve_path(struct parser *p, const char *key, const char *base, char *dir,
			size_t cap)
{
	char tmp[PATH_MAX];

	if (dir[0] == '/')
		return 0;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/%s", base, dir) >= sizeof(tmp) ||
	    strlen(tmp) >= cap)
		return fail(p, "%s: path too long", key);
	strcpy(dir, tmp);
	return 0;
}

static int numeric_address(const char *a)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, a, buf) == 1 || inet_pton(AF_INET6, a, buf) == 1;
}

static void set_defaults(struct apus_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->cluster, "apus");
	strcpy(c->transport, "shm");
	c->log_size = 64ULL << 20;
	c->max_entry = 64 << 10;
	c->fsync = FSYNC_BATCH;
	c->fsync_interval_ms = 50;
	strcpy(c->region_dir, "/dev/shm");
	c->checker = 1;
	c->read_ahead = 1;
	c->replay_in_place = 1;
	c->divergence = DIVERGENCE_REPAIR;
	c->repair_interval_s = 60;
	c->randomness = RANDOMNESS_LOG;
	c->seed_every = 1;
	c->heartbeat_ms = 10;
	c->start_timeout_ms = 15000;
	c->checkpoint_keep = 3;
	c->guard = 1;
	c->snapshot_leader = 1;
	for (int i = 0; i < APUS_MAX_NODES; i++)
		c->nodes[i].id = -1;
}

/* Reads the lines of F into C: global keys (unless NODES_ONLY) and
 * [node N] sections.  Returns 0 or -1 (P's error set). */
static int parse_lines(struct parser *p, FILE *f, struct apus_config *c, int nodes_only,
		       int *default_port, int *default_metrics)
{
	struct node_conf *cur = NULL;
	char line[8192];

	while (fgets(line, sizeof(line), f)) {
		char *s, *eq, *k, *v;

		p->line++;
		if (!strchr(line, '\n') && !feof(f))
			return fail(p, "line too long");
		/* '#' starts a comment at the line start or after blank space. */
		for (char *h = line; (h = strchr(h, '#')); h++) {
			if (h == line || isspace((unsigned char)h[-1])) {
				*h = '\0';
				break;
			}
		}
		s = trim(line);
		if (!*s)
			continue;
		if (*s == '[') {
			int id;
			char extra;

			if (sscanf(s, "[node %d]%c", &id, &extra) != 1)
				return fail(p, "bad section '%s' (expected [node N])", s);
			if (id < 0 || id >= APUS_MAX_NODES)
				return fail(p, "node id %d is out of range [0, %d]", id, APUS_MAX_NODES - 1);
			if (c->nodes[id].id >= 0)
				return fail(p, "duplicate node id %d (first at line %d)", id,
					    c->nodes[id].line);
			cur = &c->nodes[id];
			cur->id = id;
			cur->replaces = -1;
			cur->line = p->line;
			strcpy(cur->address, "127.0.0.1");
			continue;
		}
		eq = strchr(s, '=');
		if (!eq)
			return fail(p, "expected 'key = value', got '%s'", s);
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		if (!*k)
			return fail(p, "missing key before '='");
		if (!*v)
			return fail(p, "%s: missing value", k);
		if (!cur && nodes_only)
			return fail(p, "'%s' outside a [node N] section", k);
		if (cur ? set_node(p, cur, k, v) : set_global(p, c, k, v, default_port, default_metrics))
			return -1;
	}
	return 0;
}

/* Counts the nodes (ids 0..N-1 without gaps) and checks each against the
 * others; relative paths are taken from BASE.  Removed nodes keep their
 * ids but share nothing with anyone. */
static int check_nodes(struct parser *p, struct apus_config *c, const char *base,
		       int default_port, int default_metrics)
{
	c->nnodes = 0;
	p->line = 0;
	for (int i = 0; i < APUS_MAX_NODES; i++) {
		if (c->nodes[i].id < 0)
			continue;
		if (i != c->nnodes) {
			p->line = c->nodes[i].line;
			return fail(p, "node ids must be 0..N-1 without gaps: node %d is missing",
				    c->nnodes);
		}
		c->nnodes++;
	}
	if (c->nnodes == 0)
		return fail(p, "no [node N] section");
	if (!config_voters(c))
		return fail(p, "no node is a voter (member = voter)");
	for (int i = 0; i < c->nnodes; i++) {
		struct node_conf *n = &c->nodes[i];

		p->line = n->line;
		if (!n->app_port)
			n->app_port = default_port;
		if (!n->app_port)
			return fail(p, "[node %d] has no app_port (and no global app_port)", i);
		if (!n->data_dir[0])
			return fail(p, "[node %d] has no data_dir", i);
		if (resolve_path(p, "data_dir", base, n->data_dir, sizeof(n->data_dir)))
			return -1;
		if (!n->run_dir[0] && c->run_dir[0] &&
		    (size_t)snprintf(n->run_dir, sizeof(n->run_dir), "%s/%s-n%d", c->run_dir,
				     c->cluster, i) >= sizeof(n->run_dir))
			return fail(p, "run_dir: path too long");
		if (!n->run_dir[0])
			strcpy(n->run_dir, n->data_dir);
		if (resolve_path(p, "run_dir", base, n->run_dir, sizeof(n->run_dir)))
			return -1;
		if (!n->secret_file[0])
			strcpy(n->secret_file, c->secret_file);
		if (resolve_path(p, "secret_file", base, n->secret_file, sizeof(n->secret_file)))
			return -1;
		if (strcmp(c->transport, "shm") && !n->peer_port)
			return fail(p, "[node %d] has no peer_port (transport %s needs one)", i,
				    c->transport);
		if (strcmp(c->transport, "shm") && !numeric_address(n->address))
			return fail(p, "[node %d] address '%s' is not a numeric IPv4/IPv6 address "
				       "(transport %s admits peers by address)", i, n->address,
				    c->transport);
		if (n->guard_port && (n->guard_port == n->app_port || n->guard_port == n->peer_port))
			return fail(p, "[node %d] guard_port %d is also its app_port or peer_port", i,
				    n->guard_port);
		if (!n->metrics_port)
			n->metrics_port = default_metrics;
		if (n->metrics_port && (n->metrics_port == n->app_port ||
					n->metrics_port == n->peer_port ||
					n->metrics_port == n->guard_port))
			return fail(p, "[node %d] metrics_port %d is also its app_port, peer_port or "
				       "guard_port", i, n->metrics_port);
		if (n->replaces >= c->nnodes || n->replaces == i)
			return fail(p, "[node %d] replaces = %d: no other node has that id", i,
				    n->replaces);
		if (n->member == MEMBER_REMOVED)
			continue;
		for (int j = 0; j < i; j++) {
			const struct node_conf *o = &c->nodes[j];

			if (o->member == MEMBER_REMOVED)
				continue;
			if (!strcmp(o->data_dir, n->data_dir))
				return fail(p, "[node %d] shares data_dir with node %d", i, j);
			if (!strcmp(o->run_dir, n->run_dir))
				return fail(p, "[node %d] shares run_dir with node %d", i, j);
			/* A replacement may take the ports of the node it replaces
			 * (apus replace gives them only when that node no longer
			 * runs): the two do not run at once. */
			if (n->replaces == j || o->replaces == i)
				continue;
			if (n->metrics_port && !strcmp(o->address, n->address) &&
			    o->metrics_port == n->metrics_port)
				return fail(p, "[node %d] has the same address and metrics_port as node %d "
					       "(give it a metrics_port of its own)", i, j);
			if (!strcmp(o->address, n->address) && o->app_port == n->app_port)
				return fail(p, "[node %d] has the same address and app_port as node %d "
					       "(give it an app_port of its own)", i, j);
		}
	}
	return 0;
}

static void config_dir_of(const struct apus_config *c, char *base, size_t cap)
{
	snprintf(base, cap, "%s", c->path);
	*strrchr(base, '/') = '\0';
}

int config_load(const char *path, struct apus_config *c, char *err, size_t errlen)
{
	struct parser p = { .path = path, .line = 0, .err = err, .errlen = errlen };
	char base[PATH_MAX];
	int default_port = 0, default_metrics = 0, rc = -1;
	FILE *f;

	set_defaults(c);
	if (!realpath(path, c->path))
		return fail(&p, "cannot open: %s", strerror(errno));
	f = sys.fopen(c->path, "re");
	if (!f)
		return fail(&p, "cannot open: %s", strerror(errno));
	config_dir_of(c, base, sizeof(base));
	if (parse_lines(&p, f, c, 0, &default_port, &default_metrics))
		goto out;
	p.line = 0;
	if (!c->snapshot_cmd[0] != !c->snapshot_file[0]) {
		fail(&p, "snapshot_cmd and snapshot_file go together (set both or neither)");
		goto out;
	}
	if (c->snapshot_connections == SNAPSHOT_CONNECTIONS_NONE && c->snapshot_leader) {
		fail(&p, "snapshot_connections = none needs snapshot_leader = off (a leader's "
			 "fork-based snapshot is taken whatever its clients hold)");
		goto out;
	}
	if (c->seed_function[0] && c->randomness != RANDOMNESS_LOG) {
		fail(&p, "seed_function needs randomness = log (it seeds the server's generator "
			 "from the log)");
		goto out;
	}
	if (c->snapshot_load_cmd[0] && !c->snapshot_cmd[0]) {
		fail(&p, "snapshot_load_cmd needs snapshot_cmd and snapshot_file (it loads what "
			 "they make)");
		goto out;
	}
	if (!c->app_cmd[0]) {
		fail(&p, "app_cmd is not set");
		goto out;
	}
	/* A backup sees its server's greeting only where it replays in
	 * place: on the socket path it reads the output without knowing
	 * which bytes came before the server's first read. */
	if (c->checker_greeting == GREETING_SKIP && !c->replay_in_place) {
		fail(&p, "checker_greeting = skip needs replay_in_place = on");
		goto out;
	}
	if (c->max_entry > c->log_size / 4)
		c->max_entry = (uint32_t)(c->log_size / 4);
	/* A snapshot per quarter of the log keeps the log's base (the
	 * majority's snapshots) well behind its end: the leader never waits. */
	if (!c->snapshot_log_bytes || c->snapshot_log_bytes > c->log_size / 2)
		c->snapshot_log_bytes = c->snapshot_log_bytes ? c->log_size / 2 : c->log_size / 4;
	/* Ten periods: a loaded 2-core machine misses a few wake-ups in a row. */
	if (!c->suspect_ms)
		c->suspect_ms = 10 * c->heartbeat_ms;
	if (c->suspect_ms < 2 * c->heartbeat_ms) {
		p.line = c->suspect_line;
		fail(&p, "suspect_ms (%d) must be at least two heartbeat periods (%d ms)",
		     c->suspect_ms, 2 * c->heartbeat_ms);
		goto out;
	}
	if (!c->secret_file[0])
		strcpy(c->secret_file, "apus.key");
	if (resolve_path(&p, "secret_file", base, c->secret_file, sizeof(c->secret_file)))
		goto out;
	/* A template that starts with {config_dir} or {data_dir} is absolute
	 * once expanded. */
	if (c->verify_cmd[0] && c->verify_cmd[0] != '{' &&
	    resolve_path(&p, "verify_cmd", base, c->verify_cmd, sizeof(c->verify_cmd)))
		goto out;
	rc = check_nodes(&p, c, base, default_port, default_metrics);
out:
	fclose(f);
	return rc;
}

int config_format_members(const struct apus_config *c, char *out, size_t outlen)
{
	size_t o = 0;

	for (int i = 0; i < c->nnodes; i++) {
		const struct node_conf *n = &c->nodes[i];
		int k = snprintf(out + o, outlen - o,
				 "[node %d]\nmember = %s\naddress = %s\napp_port = %d\ndata_dir = %s\n"
				 "run_dir = %s\nsecret_file = %s\n",
				 i, member_role_name(n->member), n->address, n->app_port, n->data_dir,
				 n->run_dir, n->secret_file);
		if (k < 0 || (size_t)k >= outlen - o)
			return -1;
		o += (size_t)k;
#define OPTIONAL(fmt, cond, ...)                                                   \
		if (cond) {                                                        \
			k = snprintf(out + o, outlen - o, fmt, __VA_ARGS__);       \
			if (k < 0 || (size_t)k >= outlen - o)                      \
				return -1;                                         \
			o += (size_t)k;                                            \
		}
		OPTIONAL("peer_port = %d\n", n->peer_port, n->peer_port)
		OPTIONAL("guard_port = %d\n", n->guard_port, n->guard_port)
		OPTIONAL("metrics_port = %d\n", n->metrics_port, n->metrics_port)
		OPTIONAL("netns = %s\n", n->netns[0], n->netns)
		OPTIONAL("replaces = %d\n", n->replaces >= 0, n->replaces)
#undef OPTIONAL
	}
	return (int)o;
}

int config_parse_members(struct apus_config *cfg, const char *text, size_t len, char *err,
			 size_t errlen)
{
	struct parser p = { .path = "membership", .line = 0, .err = err, .errlen = errlen };
	struct apus_config *c = malloc(sizeof(*c));
	char base[PATH_MAX];
	int dp = 0, dm = 0, rc = -1;
	FILE *f;

	if (!c)
		return fail(&p, "out of memory");
	*c = *cfg;
	for (int i = 0; i < APUS_MAX_NODES; i++) {
		memset(&c->nodes[i], 0, sizeof(c->nodes[i]));
		c->nodes[i].id = -1;
	}
	config_dir_of(c, base, sizeof(base));
	f = fmemopen((void *)text, len, "r");
	if (!f) {
		fail(&p, "cannot read: %s", strerror(errno));
		goto out;
	}
	rc = parse_lines(&p, f, c, 1, &dp, &dm);
	fclose(f);
	if (!rc)
		rc = check_nodes(&p, c, base, 0, 0);
	if (!rc) {
		memcpy(cfg->nodes, c->nodes, sizeof(cfg->nodes));
		cfg->nnodes = c->nnodes;
	}
out:
	free(c);
	return rc;
}

int config_app_cmd(const struct apus_config *c, int node, char *out, size_t outlen)
{
	return config_expand(c, node, c->app_cmd, out, outlen);
}

int config_expand(const struct apus_config *c, int node, const char *tmpl, char *out,
		  size_t outlen)
{
	const struct node_conf *n = &c->nodes[node];
	size_t o = 0;

	for (const char *s = tmpl; *s;) {
		char val[PATH_MAX];
		const char *rep = NULL;
		size_t klen = 0;

		if (!strncmp(s, "{port}", 6)) {
			snprintf(val, sizeof(val), "%d", n->app_port);
			rep = val, klen = 6;
		} else if (!strncmp(s, "{address}", 9)) {
			rep = n->address, klen = 9;
		} else if (!strncmp(s, "{data_dir}", 10)) {
			rep = n->data_dir, klen = 10;
		} else if (!strncmp(s, "{node}", 6)) {
			snprintf(val, sizeof(val), "%d", node);
			rep = val, klen = 6;
		} else if (!strncmp(s, "{config_dir}", 12)) {
			/* Scripts shipped beside the config (apps/redis/snapshot.sh). */
			const char *slash = strrchr(c->path, '/');
			snprintf(val, sizeof(val), "%.*s", slash ? (int)(slash - c->path) : 1,
				 slash ? c->path : ".");
			rep = val, klen = 12;
		}
		if (rep) {
			size_t l = strlen(rep);
			if (o + l >= outlen)
				return -1;
			memcpy(out + o, rep, l);
			o += l;
			s += klen;
		} else {
			if (o + 1 >= outlen)
				return -1;
			out[o++] = *s++;
		}
	}
	out[o] = '\0';
	return 0;
}

int config_node_path(const struct apus_config *c, int node, const char *name,
		     char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s/%s", c->nodes[node].data_dir, name);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int config_run_path(const struct apus_config *c, int node, const char *name, char *out,
		    size_t outlen)
{
	int n = snprintf(out, outlen, "%s/%s", c->nodes[node].run_dir, name);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}
