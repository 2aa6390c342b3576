/* apus status: view, leader, and each node's role and progress. */
#include <string.h>
#include <time.h>

#include "common/atomic64.h"
#include "common/clock.h"
#include "coordinator/node/members.h"
#include "coordinator/storage/recovery.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "guard/host.h"
#include "guard/owner.h"
#include "cli.h"
#include "recovery_view.h"

static const char usage[] =
	"usage: apus status --config FILE [--node N] [--json]\n"
	"\n"
	"Shows the view, the leader, the membership (and a change in progress), and\n"
	"for each node its role (leader, backup, candidate, deposed, removed or down),\n"
	"the view it is in, application address, commit index, applied index and lag.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        only this node\n"
	"  -j, --json          one JSON object: {view, leader, nodes: [{id, role,\n"
	"                      app_addr, commit, applied, pid, lag, view,\n"
	"                      log_pos (bytes of log written so far), reclaim_pos\n"
	"                      (leader: the log before it is free),\n"
	"                      divergences, healthy, order_stalls (thread_order =\n"
	"                      requests: requests past the 50 ms bound), suspects_leader,\n"
	"                      leader_heartbeat_age_ms, needs_rebuild, error,\n"
	"                      recoverable (its snapshot and log rebuild its\n"
	"                      state), snapshot_index (the entry its recovery\n"
	"                      point holds: where it would restart from),\n"
	"                      snapshots, snapshot_ms, recovery_point (snapshot,\n"
	"                      checkpoint or null: the newest, whatever made it),\n"
	"                      recovery_point_index, recovery_point_age_ms,\n"
	"                      recovery_point_error (the last failure to make one\n"
	"                      since), stepdowns and stepdown_reason (a new leader\n"
	"                      that could not execute its log), writes_waiting\n"
	"                      (leader: why writes wait for log room), member\n"
	"                      (voter or learner)}],\n"
	"                      no_leader_reason (when leader is null),\n"
	"                      membership: [{id, address, app_port, role (voter or\n"
	"                      learner)}], membership_entry (the entry that agreed it;\n"
	"                      0: the config file's), change (null, or {entry (the\n"
	"                      leader's proposal not yet in force; 0: none), what})}\n"
	"                      A removed node is listed only while it still runs.\n"
	"  -h, --help          this text\n";

struct row {
	int up;
	struct node_status s;
	pid_t pid;
	struct recovery_view rv;
	int stale;		/* its recovery point is older than recovery_point_max_age_s */
};

static const char *role_name(const struct row *r)
{
	if (!r->up)
		return "down";
	return role_label(r->s.role);
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* Why ROWS show no leader, in one line (REASON). */
static void no_leader_reason(const struct apus_config *cfg, const struct row *rows, char *reason,
			     size_t len)
{
	int up = 0, able = 0, quorum = config_quorum(cfg);
	char unable[64] = "";

	for (int i = 0; i < cfg->nnodes; i++) {
		if (!rows[i].up || rows[i].s.role == ROLE_FAILED)
			continue;
		up++;
		if (rows[i].s.recoverable)
			able++;
		else
			snprintf(unable + strlen(unable), sizeof(unable) - strlen(unable), "%s%d",
				 *unable ? "," : "", i);
	}
	/* A leader that could not execute its log stepped down: say so,
	 * whatever else holds the election up. */
	char stepped[200] = "";
	for (int i = 0; i < cfg->nnodes && !stepped[0]; i++)
		if (rows[i].up && rows[i].s.stepdowns && rows[i].s.role != ROLE_LEADER)
			snprintf(stepped, sizeof(stepped), "; node %d stepped down as leader of %.150s", i,
				 rows[i].s.stepdown_reason);
	if (up < quorum)
		snprintf(reason, len, "%d of %d nodes run; electing a leader takes %d%s", up,
			 cfg->nnodes, quorum, stepped);
	else if (!able)
		snprintf(reason, len, "no running node can rebuild its state from its snapshot and "
				      "log (nodes %s cannot; apus rebuild --node N from a peer that can)",
			 unable);
	else
		snprintf(reason, len, "an election is under way%s", stepped);
}

/* MS (CLOCK_REALTIME) as the local time of day, HH:MM:SS. */
static void clock_hms(uint64_t ms, char *out, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!localtime_r(&t, &tm) || !strftime(out, len, "%H:%M:%S", &tm))
		snprintf(out, len, "?");
}

/* Why the leader's writes wait, in one line (WHY; empty when they do not):
 * its log is full, and the recovery points that would free it lag. */
static void writes_waiting(const struct apus_config *cfg, const struct row *rows, int leader,
			   char *why, size_t len)
{
	uint64_t since = leader >= 0 && rows[leader].up ? rows[leader].s.log_full_ms : 0;
	size_t at;

	why[0] = '\0';
	if (!since || realtime_ms() - since < 1000)
		return;
	char when[16];
	clock_hms(since, when, sizeof(when));
	at = (size_t)snprintf(why, len, "log full since %s: writes wait for a recovery point", when);
	int named = 0;
	for (int i = 0; i < cfg->nnodes && at < len; i++) {
		const struct recovery_view *v = &rows[i].rv;
		if (!v->error[0])
			continue;
		clock_hms(v->error_ms, when, sizeof(when));
		at += (size_t)snprintf(why + at, len - at, "; node %d's %s at %s", i, v->error, when);
		named = 1;
	}
	if (!named && at < len)
		snprintf(why + at, len - at, " (or for backups to execute the log)");
}

/* A node's recovery point: from its running process, else from its files. */
static uint64_t snapshot_index(const struct apus_config *cfg, int i, const struct row *r)
{
	struct recovery_point rp;

	if (r->up)
		return r->s.snap_idx;
	return recovery_peek(cfg, i, &rp) ? 0 : rp.index;
}

/* The node's recovery point and what went wrong making one, as JSON
 * members (status.c's part of the one recovery model). */
static void print_recovery_json(const struct row *r)
{
	const struct recovery_view *v = &r->rv;

	printf(",\"recovery_point\":");
	if (v->kind)
		printf("\"%s\",\"recovery_point_index\":%llu,\"recovery_point_age_ms\":%llu", v->kind,
		       (unsigned long long)v->index,
		       (unsigned long long)(realtime_ms() > v->made_ms ? realtime_ms() - v->made_ms : 0));
	else
		printf("null");
	if (v->error[0]) {
		printf(",\"recovery_point_error\":");
		json_string(v->error);
		printf(",\"recovery_point_error_age_ms\":%llu",
		       (unsigned long long)(realtime_ms() - v->error_ms));
	}
	if (r->up && r->s.stepdowns) {
		printf(",\"stepdowns\":%llu,\"stepdown_reason\":", (unsigned long long)r->s.stepdowns);
		json_string(r->s.stepdown_reason);
	}
}

/* What apus status shows, read once from every node's region and files. */
struct cluster_view {
	struct row rows[APUS_MAX_NODES];
	uint64_t view, lead_commit;
	int leader;			/* -1: none */
	char reason[256];		/* why there is none */
	char waiting[600];		/* why the leader's writes wait, if they do */
	uint64_t members_entry;		/* the entry whose membership is in force */
	uint64_t pending;		/* the leader's membership change not in force yet */
	char change[256];		/* a membership change under way */
};

static void read_rows(const struct apus_config *cfg, struct cluster_view *v)
{
	for (int i = 0; i < cfg->nnodes; i++) {
		struct row *r = &v->rows[i];
		const struct region_ctl *ctl;

		r->pid = host_node_pid(cfg, i);
		ctl = region_map_ctl(cfg, i);
		if (!ctl)
			continue;
		memcpy(&r->s, region_status(ctl), sizeof(r->s));
		r->up = r->pid && r->s.pid == (uint64_t)r->pid;
		recovery_view_read(cfg, i, ctl, &r->rv);
		/* A leader that takes no snapshots (snapshot_leader = off) has
		 * no point to keep fresh: its peers' count. */
		r->stale = r->up && !(r->s.role == ROLE_LEADER && !cfg->snapshot_leader) &&
			   recovery_view_stale(cfg, &r->rv, r->s.applied);
		region_unmap_ctl(ctl);
		if (r->up && r->s.role != ROLE_FAILED && r->s.view >= v->view)
			v->view = r->s.view;
	}
}

/* The membership in force, and a change under way: the leader's proposal
 * not yet in force, or steps the cluster still takes. */
static void read_membership(const struct apus_config *cfg, struct cluster_view *v)
{
	for (int i = 0; i < cfg->nnodes; i++) {
		const struct region_ctl *ctl = v->rows[i].up ? region_map_ctl(cfg, i) : NULL;
		if (!ctl)
			continue;
		const struct node_status *s = region_status(ctl);
		if (load64(&s->members_idx) > v->members_entry)
			v->members_entry = load64(&s->members_idx);
		if (i == v->leader)
			v->pending = load64(&s->member_pending);
		region_unmap_ctl(ctl);
	}
	if (!members_steps_left(cfg, v->change, sizeof(v->change)) && v->pending)
		snprintf(v->change, sizeof(v->change), "entry %llu (a membership change) is not in "
			 "force yet", (unsigned long long)v->pending);
}

static void read_cluster(const struct apus_config *cfg, struct cluster_view *v)
{
	memset(v, 0, sizeof(*v));
	v->leader = -1;
	read_rows(cfg, v);
	/* The leader is the node that says it leads the newest view; during
	 * an election there is none. */
	for (int i = 0; i < cfg->nnodes; i++)
		if (v->rows[i].up && v->rows[i].s.role == ROLE_LEADER && v->rows[i].s.view == v->view)
			v->leader = i;
	if (v->leader >= 0)
		v->lead_commit = v->rows[v->leader].s.commit;
	else
		no_leader_reason(cfg, v->rows, v->reason, sizeof(v->reason));
	writes_waiting(cfg, v->rows, v->leader, v->waiting, sizeof(v->waiting));
	read_membership(cfg, v);
}

static uint64_t lag_of(const struct cluster_view *v, const struct row *r)
{
	return r->up && v->lead_commit > r->s.applied ? v->lead_commit - r->s.applied : 0;
}

/* Whether node I is shown (--node, and members or live nodes). */
static int shown(const struct cli *c, const struct row *r, int i)
{
	return (c->node < 0 || i == c->node) && (config_is_member(&c->cfg, i) || r->up);
}

static void print_node_json(const struct cli *c, const struct cluster_view *v, int i)
{
	const struct apus_config *cfg = &c->cfg;
	const struct row *r = &v->rows[i];
	char acting[200];

	printf("{\"id\":%d,\"role\":\"%s\",\"app_addr\":\"%s:%d\",\"commit\":%llu,"
	       "\"applied\":%llu,\"pid\":%d,\"lag\":%llu",
	       i, role_name(r), cfg->nodes[i].address, cfg->nodes[i].app_port,
	       (unsigned long long)(r->up ? r->s.commit : 0),
	       (unsigned long long)(r->up ? r->s.applied : 0), r->up ? (int)r->pid : 0,
	       (unsigned long long)lag_of(v, r));
	if (r->up)
		printf(",\"view\":%llu,\"log_pos\":%llu", (unsigned long long)r->s.view,
		       (unsigned long long)r->s.log_pos);
	if (r->up && r->s.role == ROLE_LEADER)
		printf(",\"reclaim_pos\":%llu", (unsigned long long)r->s.reclaim_pos);
	if (r->up)
		printf(",\"divergences\":%llu,\"healthy\":%s,\"order_stalls\":%llu",
		       (unsigned long long)r->s.divergences,
		       r->s.unhealthy || r->stale ? "false" : "true",
		       (unsigned long long)r->s.order_stalls);
	if (i == v->leader && v->waiting[0]) {
		printf(",\"writes_waiting\":");
		json_string(v->waiting);
	}
	if (r->up && r->s.role == ROLE_BACKUP)
		printf(",\"suspects_leader\":%s,\"leader_heartbeat_age_ms\":%llu,"
		       "\"needs_rebuild\":%s",
		       r->s.suspects_leader ? "true" : "false",
		       (unsigned long long)r->s.leader_hb_age_ms, r->s.behind ? "true" : "false");
	printf(",\"snapshot_index\":%llu", (unsigned long long)snapshot_index(cfg, i, r));
	if (r->up)
		printf(",\"recoverable\":%s,\"snapshots\":%llu,\"snapshot_ms\":%llu",
		       r->s.recoverable ? "true" : "false", (unsigned long long)r->s.snap_count,
		       (unsigned long long)r->s.snap_ms);
	print_recovery_json(r);
	printf(",\"member\":\"%s\"", member_role_name(cfg->nodes[i].member));
	if (r->pid && r->s.role == ROLE_FAILED) {
		printf(",\"error\":");
		json_string(r->s.error);
	}
	if (owner_acting(cfg, i, acting, sizeof(acting))) {
		printf(",\"acting\":");
		json_string(acting);
	}
	printf("}");
}

static void print_json(const struct cli *c, const struct cluster_view *v)
{
	const struct apus_config *cfg = &c->cfg;

	printf("{\"view\":%llu,\"leader\":", (unsigned long long)v->view);
	if (v->leader >= 0) {
		printf("%d", v->leader);
	} else {
		printf("null,\"no_leader_reason\":");
		json_string(v->reason);
	}
	printf(",\"nodes\":[");
	for (int i = 0, first = 1; i < cfg->nnodes; i++) {
		if (!shown(c, &v->rows[i], i))
			continue;
		printf("%s", first ? "" : ",");
		print_node_json(c, v, i);
		first = 0;
	}
	printf("]");
	/* After the nodes: scripts that take the first object with an id for
	 * a node's keep working. */
	printf(",\"membership\":[");
	for (int i = 0, first = 1; i < cfg->nnodes; i++) {
		if (!config_is_member(cfg, i))
			continue;
		printf("%s{\"id\":%d,\"address\":\"%s\",\"app_port\":%d,\"role\":\"%s\"}",
		       first ? "" : ",", i, cfg->nodes[i].address, cfg->nodes[i].app_port,
		       member_role_name(cfg->nodes[i].member));
		first = 0;
	}
	printf("],\"membership_entry\":%llu,\"change\":", (unsigned long long)v->members_entry);
	if (v->change[0]) {
		printf("{\"entry\":%llu,\"what\":", (unsigned long long)v->pending);
		json_string(v->change);
		printf("}");
	} else {
		printf("null");
	}
	printf("}\n");
}

static void print_node_text(const struct cli *c, const struct cluster_view *v, int i)
{
	const struct apus_config *cfg = &c->cfg;
	const struct row *r = &v->rows[i];
	char addr[96], acting[200];
	int busy = owner_acting(cfg, i, acting, sizeof(acting));

	snprintf(addr, sizeof(addr), "%s:%d", cfg->nodes[i].address, cfg->nodes[i].app_port);
	if (!r->up) {
		int failed = r->pid && r->s.role == ROLE_FAILED;
		printf("%-4d %-7s %-22s %8s %12s %12s %8s%s%s%s%s%s\n", i, "down", addr, "-", "-",
		       "-", "-", failed ? "  " : "", failed ? r->s.error : "", busy ? "  " : "",
		       busy ? acting : "", busy ? " acts on it" : "");
		return;
	}
	printf("%-4d %-7s %-22s %8d %12llu %12llu %8llu", i, role_name(r), addr, (int)r->pid,
	       (unsigned long long)r->s.commit, (unsigned long long)r->s.applied,
	       (unsigned long long)lag_of(v, r));
	if (r->s.role == ROLE_BACKUP && r->s.suspects_leader)
		printf("  suspects the leader (no heartbeat for %llu ms)",
		       (unsigned long long)r->s.leader_hb_age_ms);
	if (!r->s.recoverable)
		printf("  cannot rebuild its state: its log no longer reaches back to its "
		       "snapshot (apus rebuild --node %d)", i);
	else if (r->s.role == ROLE_BACKUP && r->s.behind)
		printf("  needs rebuild: the leader's log no longer holds its next entry "
		       "(apus rebuild --node %d)", i);
	if (busy)
		printf("  %s acts on it", acting);
	if (r->rv.error[0])
		printf("  recovery point: %s", r->rv.error);
	else if (r->stale)
		printf("  recovery point older than recovery_point_max_age_s");
	if (r->s.stepdowns && r->s.role != ROLE_LEADER)
		printf("  stepped down as leader of %s", r->s.stepdown_reason);
	printf("\n");
}

static void print_text(const struct cli *c, const struct cluster_view *v)
{
	const struct apus_config *cfg = &c->cfg;

	printf("cluster %s: view %llu, leader ", cfg->cluster, (unsigned long long)v->view);
	if (v->leader >= 0)
		printf("node %d (%s:%d)\n", v->leader, cfg->nodes[v->leader].address,
		       cfg->nodes[v->leader].app_port);
	else
		printf("none: %s\n", v->reason);
	printf("membership:");
	for (int i = 0; i < cfg->nnodes; i++)
		if (config_is_member(cfg, i))
			printf(" node %d %s", i, member_role_name(cfg->nodes[i].member));
	if (v->members_entry)
		printf(" (agreed at entry %llu)", (unsigned long long)v->members_entry);
	printf("\n");
	if (v->change[0])
		printf("change in progress: %s\n", v->change);
	printf("%-4s %-7s %-22s %8s %12s %12s %8s\n", "node", "role", "app_addr", "pid", "commit",
	       "applied", "lag");
	for (int i = 0; i < cfg->nnodes; i++)
		if (shown(c, &v->rows[i], i))
			print_node_text(c, v, i);
	if (v->waiting[0])
		printf("writes wait: %s\n", v->waiting);
}

int cmd_status(int argc, char **argv)
{
	static struct cluster_view v;	/* a node_status a node: off the stack */
	struct cli c;
	int rc = cli_parse(&c, "status", usage, argc, argv);

	if (rc)
		return rc > 0 ? 0 : 2;
	read_cluster(&c.cfg, &v);
	if (c.json)
		print_json(&c, &v);
	else
		print_text(&c, &v);
	return 0;
}
