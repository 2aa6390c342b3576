/* apus replace, apus add, apus remove: membership changes while the
 * cluster serves.  The leader agrees each step through the log
 * (coordinator/node/members.h); this command asks for the first one, starts a
 * new node on this host from a peer's snapshot, and watches the cluster
 * take the rest by itself (the leader promotes a learner that caught up,
 * then removes the node it replaces), so that a command that dies half
 * way leaves a change that still completes. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "coordinator/node/members.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "guard/host.h"
#include "guard/owner.h"
#include "guard/rebuild.h"
#include "cli.h"
#include "config_update.h"

#define COMMON_OPTS                                                                          \
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"               \
	"      --no-wait       return once the change is agreed (and the new node started);\n" \
	"                      the cluster completes it by itself\n"                          \
	"  -t, --timeout MS    how long to wait for the new member to catch up\n"              \
	"                      (default 600000)\n"                                             \
	"  -j, --json          one JSON object at the end\n"                                    \
	"  -h, --help          this text\n"

#define PLACE_OPTS                                                                           \
	"  -a, --address A     its address (on this host: it is started here)\n"               \
	"      --app-port P    its application port\n"                                          \
	"      --peer-port P   its peer port (tcp, rdma)\n"                                     \
	"      --guard-port P  its guard's port (snapshots for peers)\n"                        \
	"      --metrics-port P  its metrics port\n"                                            \
	"      --data-dir D    its data directory (default: beside node N's, named n<id>)\n"   \
	"      --netns NS      run it in network namespace NS\n"

static const char usage_replace[] =
	"usage: apus replace --config C --node N --address A [--app-port P] [--peer-port P]\n"
	"                    [--guard-port P] [--data-dir D] [--netns NS] [--no-wait]\n"
	"\n"
	"Replaces node N (dead, or alive and to be retired) by a new node at A, under\n"
	"the next free node id, while clients keep being served: the new node joins as\n"
	"a learner (it gets the log, counts in no majority), is started here from a\n"
	"live peer's snapshot when A is on this host, votes once it caught up, and then\n"
	"node N is removed (and stopped, when it runs here).  Ports and paths not given\n"
	"are node N's.  Each step is an entry of the log, one node one step at a time\n"
	"(doc/operator-guide.md, \"Membership changes\").  The config file is updated to what was agreed.\n"
	"Exit status: 0 done; 1 failed (said why); 2 bad input or another change in progress.\n"
	"\n" PLACE_OPTS COMMON_OPTS;

static const char usage_add[] =
	"usage: apus add --config C --address A [--app-port P] [--peer-port P]\n"
	"                [--guard-port P] [--data-dir D] [--netns NS] [--no-wait]\n"
	"\n"
	"Adds a node at A under the next free node id: it joins as a learner, is\n"
	"started here from a live peer's snapshot when A is on this host, and votes\n"
	"once it caught up.  Settings not given are the last member's, with ports one\n"
	"past the highest in use when A is that member's address.\n"
	"Exit status: 0 done; 1 failed; 2 bad input or another change in progress.\n"
	"\n" PLACE_OPTS COMMON_OPTS;

static const char usage_remove[] =
	"usage: apus remove --config C --node N [--no-wait]\n"
	"\n"
	"Removes node N from the cluster (it is stopped when it runs on this host). A\n"
	"cluster keeps at least 3 voters.\n"
	"Exit status: 0 done; 1 failed; 2 bad input or another change in progress.\n"
	"\n"
	"  -n, --node N        the node to remove\n" COMMON_OPTS;

#define MIN_VOTERS 3
#define DEFAULT_WAIT_MS 600000
#define ASK_TIMEOUT_MS 10000
/* How long a command waits for the leader to put its own last change in
 * force (it sees the commit after its backups execute it). */
#define PENDING_GRACE_MS 3000

struct opts {
	const char *address, *data_dir, *netns;
	int app_port, peer_port, guard_port, metrics_port;
	int no_wait;
};

struct change {
	struct cli c;
	struct opts o;
	int leader;
	uint64_t t0;
};

static int port_value(const char *cmd, const char *name, const char *v, int *out)
{
	char *end;
	long p = strtol(v, &end, 10);

	if (!*v || *end || p < 1 || p > 65535) {
		cli_error("%s: --%s wants a port (1-65535), not '%s'", cmd, name, v);
		return -1;
	}
	*out = (int)p;
	return 0;
}

/* Takes this command's own options out of ARGV, then the common ones.
 * Returns 0, 1 for --help (printed), or -1 (said why). */
static int parse(struct change *ch, const char *cmd, const char *usage, int argc, char **argv,
		 int place)
{
	static const char *const names[] = { "address", "app-port", "peer-port", "guard-port",
					     "metrics-port", "data-dir", "netns" };
	static const char shorts[] = { 'a', 0, 0, 0, 0, 0, 0 };
	char *a[64], *b[64];
	int n = 0, m = 0;

	memset(&ch->o, 0, sizeof(ch->o));
	/* Progress lines reach a log file as they happen. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < argc && n < 63; i++) {
		if (!strcmp(argv[i], "--no-wait"))
			ch->o.no_wait = 1;
		else
			a[n++] = argv[i];
	}
	a[n] = NULL;
	for (size_t k = 0; place && k < sizeof(names) / sizeof(names[0]); k++) {
		const char *v = cli_take_option(n, a, names[k], shorts[k], b, &m);

		memcpy(a, b, sizeof(b));
		n = m;
		if (!v)
			continue;
		if (k == 0)
			ch->o.address = v;
		else if (k == 5)
			ch->o.data_dir = v;
		else if (k == 6)
			ch->o.netns = v;
		else if (port_value(cmd, names[k], v,
				    k == 1 ? &ch->o.app_port : k == 2 ? &ch->o.peer_port
							: k == 3 ? &ch->o.guard_port : &ch->o.metrics_port))
			return -1;
	}
	int rc = cli_parse(&ch->c, cmd, usage, n, a);
	if (rc)
		return rc;
	if (ch->c.timeout_ms == ch->c.cfg.start_timeout_ms)
		ch->c.timeout_ms = DEFAULT_WAIT_MS;
	ch->t0 = host_mono_ms();
	return 0;
}

/* The membership in force on this host now (the newest a local node has). */
static void current(const struct change *ch, struct apus_config *now)
{
	*now = ch->c.cfg;
	members_follow(now, NULL, 0);
}

/* The leader, if it runs on this host and serves: its id, else -1. */
static int local_leader(const struct apus_config *cfg)
{
	for (int i = 0; i < cfg->nnodes; i++) {
		const struct region_ctl *ctl;
		pid_t pid;
		int ok;

		if (!config_is_member(cfg, i) || !host_node_is_local(cfg, i) ||
		    !(pid = host_node_pid(cfg, i)) || !(ctl = region_map_ctl(cfg, i)))
			continue;
		const struct node_status *s = region_status(ctl);
		ok = s->pid == (uint64_t)pid && s->role == ROLE_LEADER && s->ready;
		region_unmap_ctl(ctl);
		if (ok)
			return i;
	}
	return -1;
}

/* The entry of the serving leader's last change while it is not in force
 * on the leader itself; 0 when none (or no leader serves here: a dead
 * leader's region keeps what it last said). */
static uint64_t leader_pending(const struct change *ch)
{
	const struct region_ctl *ctl;
	uint64_t pending = 0;
	int leader = local_leader(&ch->c.cfg);

	if (leader >= 0 && (ctl = region_map_ctl(&ch->c.cfg, leader))) {
		pending = load64(&region_status(ctl)->member_pending);
		region_unmap_ctl(ctl);
	}
	return pending;
}

/* Waits up to MS for the leader to put its last change in force; the
 * entry still pending, or 0. */
static uint64_t wait_leader_pending(const struct change *ch, int ms)
{
	uint64_t pending;

	for (int waited = 0; (pending = leader_pending(ch)) && waited < ms; waited += 20)
		host_sleep_ms(20);
	return pending;
}

/* Bad input or a change in progress: 2, said why.  0 if none.  WANT
 * removing a learner is the way out of a change in progress. */
static int busy(const struct change *ch, const struct apus_config *want)
{
	char why[256];
	uint64_t pending;

	if (members_steps_left(&ch->c.cfg, why, sizeof(why)) && !members_aborts(&ch->c.cfg, want)) {
		cli_error("another change is in progress: %s", why);
		return 2;
	}
	/* A backup puts an entry in force when it executes it, the leader
	 * when it sees the commit: a command right after another may find
	 * the leader a moment behind its backups. */
	if ((pending = wait_leader_pending(ch, PENDING_GRACE_MS))) {
		cli_error("another change is in progress: the leader's entry %llu is not in force yet",
			  (unsigned long long)pending);
		return 2;
	}
	return 0;
}

/* Asks LEADER to propose WANT.  0 with *IDX, or the leader's -errno
 * (-ETIMEDOUT: no answer) with WHY set. */
static int ask_leader(const struct apus_config *cfg, int leader, const struct apus_config *want,
		      uint64_t *idx, char *why, size_t whylen)
{
	char *text = malloc(MEMBERS_TEXT_MAX), path[PATH_MAX], tmp[PATH_MAX + 8];
	struct region_ctl *ctl;
	int len, rc = -ETIMEDOUT;
	FILE *f;

	snprintf(why, whylen, "the leader (node %d) did not answer within %d ms", leader,
		 ASK_TIMEOUT_MS);
	if (!text || (len = config_format_members(want, text, MEMBERS_TEXT_MAX)) < 0 ||
	    config_node_path(cfg, leader, MEMBERS_WANT_FILE, path, sizeof(path))) {
		snprintf(why, whylen, "the membership is too big");
		free(text);
		return -E2BIG;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f || fwrite(text, 1, (size_t)len, f) != (size_t)len || fclose(f) ||
	    rename(tmp, path) < 0) {
		snprintf(why, whylen, "cannot write %.150s: %s", path, strerror(errno));
		free(text);
		return -EIO;
	}
	free(text);
	ctl = region_map_ctl_rw(cfg, leader);
	if (!ctl) {
		snprintf(why, whylen, "cannot open node %d's region: %s", leader, strerror(errno));
		return -EIO;
	}
	struct member_words *w = &region_mail(ctl)->member;
	uint64_t seq = load64(&w->want_seq), ans = load64(&w->answered);
	seq = (seq > ans ? seq : ans) + 1;
	store64(&w->want_seq, seq);
	for (int waited = 0; waited < ASK_TIMEOUT_MS; waited += 10) {
		if (load64(&w->answered) == seq) {
			rc = (int)__atomic_load_n(&w->err, __ATOMIC_ACQUIRE);
			*idx = load64(&w->idx);
			snprintf(why, whylen, "%.*s", (int)sizeof(w->why), w->why);
			break;
		}
		host_sleep_ms(10);
	}
	region_unmap_ctl(ctl);
	return rc;
}

/* Whether node NODE is MEMBER in the membership in force here. */
static int in_force(const struct change *ch, int node, int member)
{
	struct apus_config *now = malloc(sizeof(*now));
	int yes;

	if (!now)
		return 0;
	current(ch, now);
	yes = node < now->nnodes && now->nodes[node].member == member;
	free(now);
	return yes;
}

/* Asks for WANT and waits until it is in force on this host; prints WHAT.
 * Returns 0, 2 (refused: bad input or busy), or 1. */
static int step(struct change *ch, const struct apus_config *want, int node, int member,
		const char *what)
{
	char why[256];
	uint64_t idx = 0;
	int rc;

	/* A full log (the backups' snapshots make room) or a leader still
	 * catching up: ask again for a while.  A leader that died before it
	 * answered: ask its successor, unless the change got in already. */
	for (uint64_t t0 = host_mono_ms();; host_sleep_ms(100)) {
		rc = ask_leader(&ch->c.cfg, ch->leader, want, &idx, why, sizeof(why));
		if (rc == -ETIMEDOUT && in_force(ch, node, member))
			return 0;
		if (rc == -ETIMEDOUT && (ch->leader = local_leader(&ch->c.cfg)) >= 0 &&
		    host_mono_ms() - t0 < 3 * ASK_TIMEOUT_MS)
			continue;
		if (rc != -EAGAIN || host_mono_ms() - t0 > ASK_TIMEOUT_MS)
			break;
	}
	if (rc == -EBUSY || rc == -EINVAL) {
		cli_error("the leader refused: %s", why);
		return 2;
	}
	if (rc) {
		cli_error("the change was not proposed: %s", why);
		return 1;
	}
	if (!ch->c.json)
		printf("%s: entry %llu\n", what, (unsigned long long)idx);
	/* In force on the leader (this host) once committed; a new leader
	 * without the entry in its log means it was lost: nothing changed. */
	for (int waited = 0;; waited += 20) {
		if (in_force(ch, node, member) &&
		    wait_leader_pending(ch, PENDING_GRACE_MS) != idx)
			return 0;
		if (waited >= ASK_TIMEOUT_MS * 3) {
			cli_error("entry %llu is not in force after %d ms: the leader may have died "
				  "with it (see apus status; a lost change changed nothing, run the "
				  "command again)", (unsigned long long)idx, waited);
			return 1;
		}
		host_sleep_ms(20);
	}
}

/* Waits until node NODE is MEMBER in the membership in force here; 0, or
 * 1 after the timeout (said why). */
static int wait_member(struct change *ch, int node, int member, const char *what)
{
	for (uint64_t start = host_mono_ms();; host_sleep_ms(50)) {
		if (in_force(ch, node, member))
			break;
		if (host_mono_ms() - start > (uint64_t)ch->c.timeout_ms) {
			cli_error("%s did not happen within %d ms (see apus status; the cluster goes "
				  "on with it by itself)", what, ch->c.timeout_ms);
			return 1;
		}
	}
	if (!ch->c.json)
		printf("%s (%.1f s after the command began)\n", what,
		       (host_mono_ms() - ch->t0) / 1000.0);
	return 0;
}

/* The config file gets the membership in force; says so. */
static int update_file(struct change *ch)
{
	struct apus_config *now = malloc(sizeof(*now));
	char err[600];
	int rc = 1;

	if (!now)
		return 1;
	current(ch, now);
	if (config_update_members(now, ch->c.cfg.path, err, sizeof(err)))
		cli_error("%s", err);
	else
		rc = 0;
	free(now);
	return rc;
}

/* Node ID of WANT (a learner the cluster agreed) started here from a live
 * peer's snapshot, with its guard.  0 or 1. */
static int start_new_node(struct change *ch, struct apus_config *want, int id)
{
	char lib[PATH_MAX], err[600], holder[300];
	struct rebuild_info r;
	int fd, rc;

	if (!host_node_is_local(want, id)) {
		if (!ch->c.json)
			printf("node %d is on another host: start it there with 'apus rebuild "
			       "--config %s --node %d' (with this config file)\n", id, ch->c.cfg.path, id);
		return 0;
	}
	if (host_find_lib(lib, sizeof(lib)))
		return 1;
	if (strcmp(want->transport, "shm") && host_ensure_key(want, id))
		return 1;
	fd = owner_lock(want, id, OWNER_LOCK_FILE, "apus replace", 10000, NULL, holder,
			sizeof(holder));
	if (fd < 0) {
		cli_error("node %d: %s", id, holder);
		return 1;
	}
	rc = node_rebuild(want, id, -1, lib, &r, NULL, err, sizeof(err));
	owner_unlock(fd);
	if (rc) {
		cli_error("cannot start node %d: %s (it stays a learner; 'apus rebuild --config %s "
			  "--node %d' starts it)", id, err, ch->c.cfg.path, id);
		return 1;
	}
	if (want->guard)
		host_start_guard(want, id);
	if (!ch->c.json)
		printf("node %d started from node %d's snapshot at entry %llu (%.1f MB, %llu ms); "
		       "pid %d\n", id, r.from, (unsigned long long)r.index, r.snapshot_bytes / 1e6,
		       (unsigned long long)r.total_ms, (int)r.pid);
	return 0;
}

/* Stops NODE if it runs on this host. */
static void stop_if_here(struct change *ch, int node)
{
	int which[APUS_MAX_NODES] = { 0 };

	if (!host_node_is_local(&ch->c.cfg, node) || !host_node_pid(&ch->c.cfg, node))
		return;
	which[node] = 1;
	host_stop_nodes(&ch->c.cfg, which, 10000, 1);
}

static int highest(const struct apus_config *c, size_t field)
{
	int best = 0;

	for (int i = 0; i < c->nnodes; i++) {
		int v = *(const int *)((const char *)&c->nodes[i] + field);
		if (v > best)
			best = v;
	}
	return best;
}

/* WANT := the current membership plus a learner at the place the options
 * say, under the next free id (its other settings from node FROM).
 * Returns the new id, or -1 with a message (bad input: exit 2). */
static int new_learner(struct change *ch, struct apus_config *want, int from, int replaces)
{
	const struct apus_config *c = &ch->c.cfg;
	int id = c->nnodes;
	struct node_conf *n;
	char dir[PATH_MAX], path[PATH_MAX], why[300];
	char *text;
	struct stat st;

	if (!ch->o.address) {
		cli_error("--address is required");
		return -1;
	}
	if (id >= APUS_MAX_NODES) {
		cli_error("no node id is left: a cluster has ids 0..%d over its life, and removed "
			  "nodes keep theirs", APUS_MAX_NODES - 1);
		return -1;
	}
	*want = *c;
	want->nnodes = id + 1;
	n = &want->nodes[id];
	*n = c->nodes[from];
	n->id = id;
	n->line = 0;
	n->member = MEMBER_LEARNER;
	n->replaces = replaces;
	snprintf(n->address, sizeof(n->address), "%s", ch->o.address);
	/* A second node of the same host needs ports of its own; the
	 * replacement of a node that no longer runs here takes its ports
	 * (configs allow that pair to share them). */
	int same_host = !strcmp(ch->o.address, c->nodes[from].address) &&
			(replaces < 0 || host_node_pid(c, from));
	n->app_port = ch->o.app_port ? ch->o.app_port
		      : same_host ? highest(c, offsetof(struct node_conf, app_port)) + 1 : n->app_port;
	if (ch->o.peer_port || (same_host && n->peer_port))
		n->peer_port = ch->o.peer_port ? ch->o.peer_port
					       : highest(c, offsetof(struct node_conf, peer_port)) + 1;
	if (ch->o.guard_port || (same_host && n->guard_port))
		n->guard_port = ch->o.guard_port ? ch->o.guard_port
						 : highest(c, offsetof(struct node_conf, guard_port)) + 1;
	if (ch->o.metrics_port || (same_host && n->metrics_port))
		n->metrics_port = ch->o.metrics_port
					  ? ch->o.metrics_port
					  : highest(c, offsetof(struct node_conf, metrics_port)) + 1;
	/* Another address is another place: its namespace is not node FROM's. */
	if (ch->o.netns)
		snprintf(n->netns, sizeof(n->netns), "%s", ch->o.netns);
	else if (strcmp(ch->o.address, c->nodes[from].address))
		n->netns[0] = '\0';
	if (ch->o.data_dir) {
		if (ch->o.data_dir[0] == '/')
			snprintf(n->data_dir, sizeof(n->data_dir), "%s", ch->o.data_dir);
		else if (!getcwd(dir, sizeof(dir)) ||
			 (size_t)snprintf(n->data_dir, sizeof(n->data_dir), "%s/%s", dir,
					  ch->o.data_dir) >= sizeof(n->data_dir)) {
			cli_error("--data-dir: path too long");
			return -1;
		}
	} else {
		snprintf(dir, sizeof(dir), "%s", c->nodes[from].data_dir);
		snprintf(n->data_dir, sizeof(n->data_dir), "%s/n%d", dirname(dir), id);
	}
	if (c->run_dir[0]) {
		char leaf[96];
		snprintf(leaf, sizeof(leaf), "/%s-n%d", c->cluster, id);
		if (strlen(c->run_dir) + strlen(leaf) >= sizeof(n->run_dir)) {
			cli_error("run_dir: path too long");
			return -1;
		}
		memcpy(n->run_dir, c->run_dir, strlen(c->run_dir));
		strcpy(n->run_dir + strlen(c->run_dir), leaf);
	} else {
		memcpy(n->run_dir, n->data_dir, sizeof(n->run_dir));
	}
	for (int k = 0; k < c->nnodes; k++)
		if (config_is_member(c, k) && !strcmp(c->nodes[k].address, n->address) &&
		    c->nodes[k].app_port == n->app_port) {
			cli_error("%s:%d is already node %d's address", n->address, n->app_port, k);
			return -1;
		}
	snprintf(path, sizeof(path), "%s/%s", n->data_dir, REGION_FILE);
	if (lstat(path, &st) == 0) {
		cli_error("%s holds a node's data already (%s): give --data-dir a new directory",
			  n->data_dir, REGION_FILE);
		return -1;
	}
	/* The same checks as a config file's, on the result. */
	text = malloc(MEMBERS_TEXT_MAX);
	int len = text ? config_format_members(want, text, MEMBERS_TEXT_MAX) : -1;
	int bad = len < 0 || config_parse_members(want, text, (size_t)len, why, sizeof(why));
	free(text);
	if (bad) {
		cli_error("the new node does not fit the cluster: %s", len < 0 ? "too big" : why);
		return -1;
	}
	return id;
}

static int begin(struct change *ch, const struct apus_config *want)
{
	/* A leader just killed (the node to replace, say) is followed by a
	 * new one within an election. */
	for (uint64_t t0 = host_mono_ms();
	     (ch->leader = local_leader(&ch->c.cfg)) < 0 && host_mono_ms() - t0 < ASK_TIMEOUT_MS;)
		host_sleep_ms(50);
	if (ch->leader < 0) {
		cli_error("no leader serves on this host: a membership change is asked of the "
			  "leader (run the command on its host; see apus status)");
		return 1;
	}
	return busy(ch, want);
}

static void print_json(struct change *ch, const char *cmd, int id, int gone)
{
	if (ch->c.json)
		printf("{\"command\":\"%s\",\"node\":%d,\"removed\":%d,\"total_ms\":%llu}\n", cmd, id,
		       gone, (unsigned long long)(host_mono_ms() - ch->t0));
}

/* Node ID of WANT in as a learner (replacing REPLACES, or -1), started
 * here, and unless --no-wait until it votes.  0, or the exit status. */
static int bring_in(struct change *ch, struct apus_config *want, int id, int replaces)
{
	char what[200];
	int rc;

	snprintf(what, sizeof(what), "node %d (%s:%d) joins as a learner", id,
		 want->nodes[id].address, want->nodes[id].app_port);
	if (replaces >= 0)
		snprintf(what + strlen(what), sizeof(what) - strlen(what), " in node %d's place",
			 replaces);
	if ((rc = step(ch, want, id, MEMBER_LEARNER, what)) || (rc = update_file(ch)) ||
	    (rc = start_new_node(ch, want, id)) || ch->o.no_wait)
		return rc;
	snprintf(what, sizeof(what), "node %d caught up and votes", id);
	return wait_member(ch, id, MEMBER_VOTER, what);
}

int cmd_replace(int argc, char **argv)
{
	struct change ch;
	struct apus_config *want = malloc(sizeof(*want));
	int rc, old, id;
	char what[200];

	if (!want)
		return 1;
	rc = parse(&ch, "replace", usage_replace, argc, argv, 1);
	if (rc) {
		free(want);
		return rc > 0 ? 0 : 2;
	}
	old = ch.c.node;
	rc = 2;
	if (old < 0) {
		cli_error("replace: --node N (the node to replace) is required");
		goto out;
	}
	if (!config_is_member(&ch.c.cfg, old)) {
		cli_error("node %d is not a member of the cluster (it was removed)", old);
		goto out;
	}
	if ((id = new_learner(&ch, want, old, old)) < 0)
		goto out;
	if ((rc = begin(&ch, want)))
		goto out;
	if ((rc = bring_in(&ch, want, id, old)))
		goto out;
	if (ch.o.no_wait) {
		if (!ch.c.json)
			printf("the leader makes node %d a voter once it caught up, then removes node "
			       "%d (apus status shows the change in progress)\n", id, old);
		print_json(&ch, "replace", id, -1);
		goto out;
	}
	snprintf(what, sizeof(what), "node %d removed", old);
	if ((rc = wait_member(&ch, old, MEMBER_REMOVED, what)))
		goto out;
	stop_if_here(&ch, old);
	rc = update_file(&ch);
	if (!rc && !ch.c.json)
		printf("%s updated: node %d replaced by node %d\n", ch.c.cfg.path, old, id);
	print_json(&ch, "replace", id, old);
out:
	free(want);
	return rc;
}

int cmd_add(int argc, char **argv)
{
	struct change ch;
	struct apus_config *want = malloc(sizeof(*want));
	int rc, from = -1, id;

	if (!want)
		return 1;
	rc = parse(&ch, "add", usage_add, argc, argv, 1);
	if (rc) {
		free(want);
		return rc > 0 ? 0 : 2;
	}
	rc = 2;
	if (ch.c.node >= 0) {
		cli_error("add: the new node's id is the next free one; --node is not taken");
		goto out;
	}
	for (int k = 0; k < ch.c.cfg.nnodes; k++)
		if (config_is_member(&ch.c.cfg, k))
			from = k;
	if ((id = new_learner(&ch, want, from, -1)) < 0)
		goto out;
	if ((rc = begin(&ch, want)))
		goto out;
	if ((rc = bring_in(&ch, want, id, -1)) || (!ch.o.no_wait && (rc = update_file(&ch))))
		goto out;
	print_json(&ch, "add", id, -1);
out:
	free(want);
	return rc;
}

int cmd_remove(int argc, char **argv)
{
	struct change ch;
	struct apus_config *want = malloc(sizeof(*want));
	int rc, node;
	char what[200];

	if (!want)
		return 1;
	rc = parse(&ch, "remove", usage_remove, argc, argv, 0);
	if (rc) {
		free(want);
		return rc > 0 ? 0 : 2;
	}
	node = ch.c.node;
	rc = 2;
	if (node < 0) {
		cli_error("remove: --node N is required");
		goto out;
	}
	if (!config_is_member(&ch.c.cfg, node)) {
		cli_error("node %d is not a member of the cluster (it was removed)", node);
		goto out;
	}
	if (config_is_voter(&ch.c.cfg, node) && config_voters(&ch.c.cfg) - 1 < MIN_VOTERS) {
		cli_error("removing node %d would leave %d voters: a cluster keeps at least %d "
			  "(replace it instead, or add one first)", node, config_voters(&ch.c.cfg) - 1,
			  MIN_VOTERS);
		goto out;
	}
	*want = ch.c.cfg;
	want->nodes[node].member = MEMBER_REMOVED;
	if ((rc = begin(&ch, want)))
		goto out;
	snprintf(what, sizeof(what), "node %d (%s:%d) is removed", node,
		 want->nodes[node].address, want->nodes[node].app_port);
	if ((rc = step(&ch, want, node, MEMBER_REMOVED, what)))
		goto out;
	stop_if_here(&ch, node);
	rc = update_file(&ch);
	if (!rc && !ch.c.json)
		printf("%s updated: node %d removed\n", ch.c.cfg.path, node);
	print_json(&ch, "remove", node, node);
out:
	free(want);
	return rc;
}
