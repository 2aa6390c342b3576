/* Node life cycle: map the region (carrying the durable log over from a
 * previous run), open the transport, pick the starting role, run the role
 * thread and the fsync thread; plus what every role shares: the durable
 * words, the scan of the log's end, and execution of committed entries. */
#define LOG_PREFIX "node: "
#include "coordinator/node/node_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "coordinator/node/child_env.h"
#include "common/logger.h"
#include "coordinator/node/members.h"
#include "coordinator/node/metrics.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/node/replay.h"

/* Spinning only pays while the peer we wait for has a core of its own; on
 * a 2-core machine running three replicas it mostly steals that core. */
#define DEFAULT_SPIN_US 5
#define DEFAULT_SPIN_MAX_US 200
#define SERVER_LOAD_NS (3ULL * 1000000000ULL)

void (*node_reexec_hook)(struct node *n);

int node_serving(struct node *n)
{
	return __atomic_load_n(&n->role, __ATOMIC_ACQUIRE) == ROLE_LEADER &&
	       __atomic_load_n(&n->serving, __ATOMIC_ACQUIRE);
}

const struct apus_config *node_config(const struct node *n)
{
	return &n->cfg;
}

int node_app_port(const struct node *n)
{
	return n->cfg.nodes[n->self].app_port;
}

int node_self(const struct node *n)
{
	return n->self;
}

int node_leader(struct node *n)
{
	return __atomic_load_n(&n->leader, __ATOMIC_ACQUIRE);
}

struct replay *node_replay(struct node *n)
{
	return n->exec.replay;
}

void node_set_point_cut(struct node *n, int (*fn)(struct viewstamp *first))
{
	/* Pairs with the acquire load in snapshot.c's point_cut(). */
	__atomic_store_n(&n->snap.point_cut, fn, __ATOMIC_RELEASE);
}

void node_set_point_conn(struct node *n, int (*fn)(int fd, struct viewstamp *vs))
{
	/* Pairs with the acquire load in snapshot.c. */
	__atomic_store_n(&n->snap.point_conn, fn, __ATOMIC_RELEASE);
}

void node_set_input_pending(struct node *n, int (*fn)(void))
{
	/* Pairs with the acquire load in snapshot.c's input_pending(). */
	__atomic_store_n(&n->snap.input_pending, fn, __ATOMIC_RELEASE);
}

void node_app_listening(struct node *n)
{
	__atomic_store_n(&n->listen_ns, now_ns(), __ATOMIC_RELEASE);
	__atomic_store_n(&n->status->app_listening, 1, __ATOMIC_RELEASE);
}

void node_app_ready(struct node *n)
{
	if (!__atomic_load_n(&n->status->app_ready, __ATOMIC_RELAXED))
		__atomic_store_n(&n->status->app_ready, 1, __ATOMIC_RELEASE);
}

void node_order_stalled(struct node *n)
{
	__atomic_add_fetch(&n->status->order_stalls, 1, __ATOMIC_RELAXED);
}

void node_refused_clients(struct node *n, uint64_t count)
{
	n->status->refused_clients = count;
}

void node_update_status(struct node *n)
{
	struct node_status *s = n->status;

	s->view = __atomic_load_n(&n->view, __ATOMIC_RELAXED);
	s->role = node_role(n);
	s->leader = __atomic_load_n(&n->leader, __ATOMIC_RELAXED);
	s->commit = __atomic_load_n(&n->commit, __ATOMIC_RELAXED);
	s->applied = __atomic_load_n(&n->exec.applied, __ATOMIC_RELAXED);
	s->peers_connected = __atomic_load_n(&n->connected, __ATOMIC_RELAXED) | (1u << n->self);
	store64(&s->updated_ms, realtime_ms());
}

void node_set_role(struct node *n, int role, int leader, uint64_t view)
{
	/* A failover, as this node sees it: a newer view's leader, after the first it knew. */
	if (leader >= 0 && view + 1 > n->elect.led_views) {
		if (n->elect.led_views)
			status_add(&n->status->leader_changes, 1);
		n->elect.led_views = view + 1;
	}
	__atomic_store_n(&n->view, view, __ATOMIC_RELEASE);
	__atomic_store_n(&n->leader, leader, __ATOMIC_RELEASE);
	__atomic_store_n(&n->role, role, __ATOMIC_RELEASE);
	node_update_status(n);
	/* Proposers waiting for a majority must look at the role again. */
	n->ops->wake(n->tp);
}

void node_save_durable(struct node *n)
{
	long pg = sysconf(_SC_PAGESIZE);

	/* The control page holds the durable words; a vote must be on disk
	 * before anyone hears of it. */
	if (n->wal.fd >= 0)
		wal_save_ctl(&n->wal);
	else if (msync(n->region, (size_t)pg, MS_SYNC) < 0)
		pr_perror("msync of the durable words failed");
}

/* Log bytes [pos, pos+len) are to be durable (fsync = always: now). */
void node_persist(struct node *n, uint64_t pos, size_t len)
{
	uintptr_t a, b, pg;

	if (n->cfg.fsync == FSYNC_NONE || !len)
		return;
	if (n->wal.fd >= 0) {
		wal_persist(&n->wal, pos, len);
		return;
	}
	if (n->cfg.fsync != FSYNC_ALWAYS)
		return;
	pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	a = (uintptr_t)(n->log + pos % n->log_size);
	b = a + len;
	a &= ~(uintptr_t)(pg - 1);
	if (msync((void *)a, b - a, MS_SYNC) < 0)
		pr_perror("msync of the log failed");
}

/* fsync = batch: the log reaches the disk at least every interval: as a
 * copy (wal.h), or, for a region on disk, by msync of the mapping rather
 * than fdatasync of a descriptor (the transport may swap the file under
 * the mapping: shm fencing). */
static void *sync_main(void *arg)
{
	struct node *n = arg;
	struct timespec ts = { n->cfg.fsync_interval_ms / 1000,
			       (long)(n->cfg.fsync_interval_ms % 1000) * 1000000 };
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!__atomic_load_n(&n->stopping, __ATOMIC_RELAXED)) {
		nanosleep(&ts, NULL);
		if (n->wal.fd >= 0)
			wal_pass(&n->wal);
		else if (msync(n->region, n->region_size, MS_SYNC) < 0)
			pr_perror("msync of the log failed");
	}
	return NULL;
}

/* Joins T, waiting up to DEADLINE (CLOCK_REALTIME, as the join wants):
 * 0, or -1 (logged with NAME). */
static int join_by(pthread_t t, const struct timespec *deadline, const char *name)
{
	int rc = pthread_timedjoin_np(t, NULL, deadline);

	if (rc)
		pr_err("node_stop: the %s thread did not end in time: %s", name, strerror(rc));
	return rc ? -1 : 0;
}

int node_stop(struct node *n, int wait_ms)
{
	struct timespec deadline;
	uint64_t at = realtime_ns() + (uint64_t)wait_ms * 1000000ULL;
	int rc = 0;

	deadline.tv_sec = (time_t)(at / 1000000000ULL);
	deadline.tv_nsec = (long)(at % 1000000000ULL);
	__atomic_store_n(&n->stopping, 1, __ATOMIC_RELEASE);
	n->ops->wake(n->tp);	/* a role thread waiting on its doorbell */
	rc |= join_by(n->threads.role, &deadline, "role");
	if (n->threads.sync_started)
		rc |= join_by(n->threads.sync, &deadline, "fsync");
	if (n->threads.snap_started)
		rc |= join_by(n->threads.snap, &deadline, "snapshot");
	if (n->threads.metrics_started)
		rc |= join_by(n->threads.metrics, &deadline, "metrics");
	n->threads.sync_started = n->threads.snap_started = n->threads.metrics_started = 0;
	return rc;
}

/* Skips the unused tail of a lap (no room for a marker there). */
static uint64_t skip_dead_tail(struct node *n, uint64_t pos)
{
	return log_pos_marker_fits(n->log_size, pos) ? pos : log_pos_next_lap(n->log_size, pos);
}

/* node_entry_at(); CRC: verify the entry's CRC too. */
static const struct entry_hdr *entry_at(struct node *n, uint64_t *pos, uint64_t idx, int crc)
{
	for (int hop = 0; hop < 2; hop++) {
		uint64_t p = skip_dead_tail(n, *pos);
		uint64_t off = p % n->log_size;
		const struct entry_hdr *e = (const void *)(n->log + off);

		if (!(crc ? entry_check : entry_landed)(e, idx, n->log_size - off))
			return NULL;
		if (e->type != ENTRY_WRAP) {
			*pos = p;
			return e;
		}
		*pos = log_pos_next_lap(n->log_size, p);
	}
	return NULL;
}

const struct entry_hdr *node_entry_at(struct node *n, uint64_t *pos, uint64_t idx)
{
	return entry_at(n, pos, idx, 1);
}

int node_entry_landed(struct node *n, uint64_t pos, uint64_t idx)
{
	return entry_at(n, &pos, idx, 0) != NULL;
}

void node_log_end(struct node *n, uint64_t *last_view, uint64_t *last_idx, uint64_t *end_pos)
{
	/* Any thread may ask (the role thread moves these: see node_execute). */
	uint64_t pos = __atomic_load_n(&n->exec.pos, __ATOMIC_RELAXED);
	uint64_t idx = __atomic_load_n(&n->exec.idx, __ATOMIC_RELAXED);
	uint64_t view = __atomic_load_n(&n->exec.view, __ATOMIC_RELAXED);
	struct log_hint *h = &n->ctl->hint;
	uint64_t hidx = __atomic_load_n(&h->idx, __ATOMIC_RELAXED);

	/* Start from the newest entry we know we hold when it is still there:
	 * the log may reach further than our server can (its start was
	 * reclaimed past our snapshot), and a vote must see all of it. */
	if (hidx >= idx) {
		uint64_t p = __atomic_load_n(&h->pos, __ATOMIC_RELAXED);
		const struct entry_hdr *e = node_entry_at(n, &p, hidx);

		if (e && e->view == __atomic_load_n(&h->view, __ATOMIC_RELAXED) && e->view >= view) {
			view = e->view;
			pos = p + entry_size(e->data_sz);
			idx = hidx + 1;
		}
	}
	for (;;) {
		uint64_t p = pos;
		const struct entry_hdr *e = node_entry_at(n, &p, idx);

		if (!e || e->view < view)
			break;
		view = e->view;
		pos = p + entry_size(e->data_sz);
		idx++;
	}
	*last_view = view;
	*last_idx = idx - 1;
	*end_pos = pos;
}

void node_set_hint(struct node *n, uint64_t idx, uint64_t pos, uint64_t view)
{
	struct log_hint *h = &n->ctl->hint;

	/* idx last: a reader checks the entry at pos anyway. */
	__atomic_store_n(&h->idx, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->pos, pos, __ATOMIC_RELAXED);
	__atomic_store_n(&h->view, view, __ATOMIC_RELAXED);
	__atomic_store_n(&h->idx, idx, __ATOMIC_RELEASE);
}

static void report_applied(struct node *n)
{
	int leader = __atomic_load_n(&n->leader, __ATOMIC_ACQUIRE);
	uint64_t applied = n->exec.idx - 1;

	if (leader < 0 || leader == n->self)
		return;
	/* applied_end first: the leader reads applied as "up to here". */
	n->ops->write(n->tp, leader, offsetof(struct region_ctl, peer[n->self].applied_end),
		      &n->exec.pos, 8);
	n->ops->write(n->tp, leader, offsetof(struct region_ctl, peer[n->self].applied), &applied, 8);
	n->ops->ring(n->tp, leader);
}

int node_server_up(struct node *n)
{
	/* Replay connects to the server: not before it listens (a restarted
	 * node gets the whole log before its server is up). */
	if (!__atomic_load_n(&n->status->app_listening, __ATOMIC_ACQUIRE))
		return 0;
	/* Nor before it loaded its snapshot: a server listens before it
	 * loads, and refuses requests meanwhile (Redis: -LOADING), which
	 * would drop them.  A server that never waits in epoll_wait() is
	 * taken as ready after SERVER_LOAD_NS. */
	return __atomic_load_n(&n->status->app_ready, __ATOMIC_ACQUIRE) ||
	       now_ns() - __atomic_load_n(&n->listen_ns, __ATOMIC_ACQUIRE) >= SERVER_LOAD_NS;
}

int node_execute(struct node *n, uint64_t upto, uint64_t checked)
{
	int progress = 0;

	if (!node_server_up(n))
		return 0;
	/* The guard is taking a checkpoint at the entry we stand on, or we
	 * are taking a snapshot of our own there, or loading the one we
	 * started from. */
	if (n->ckpt.hold || node_snapshot_holds(n))
		return 0;
	/* A batch bounded in time (a quarter heartbeat period): the caller's
	 * heartbeats must not stall behind a long catch-up. */
	uint64_t until = now_ns() + (uint64_t)n->cfg.heartbeat_ms * 250000ULL;
	for (int batch = 0; n->exec.idx <= upto; batch++) {
		if (batch && !(batch & 15) && now_ns() > until)
			break;
		uint64_t pos = n->exec.pos;
		const struct entry_hdr *e = entry_at(n, &pos, n->exec.idx, n->exec.idx > checked);

		if (!e) {
			pr_err("entry %llu vanished from the log before execution",
			       (unsigned long long)n->exec.idx);
			break;
		}
		if (!replay_exec(n->exec.replay, e))
			break;
		if (e->type == ENTRY_MEMBERS)
			members_adopt(n, entry_data(e), e->data_sz, e->idx);
		__atomic_store_n(&n->exec.pos, pos + entry_size(e->data_sz), __ATOMIC_RELAXED);
		__atomic_store_n(&n->exec.view, e->view, __ATOMIC_RELAXED);
		__atomic_store_n(&n->exec.idx, n->exec.idx + 1, __ATOMIC_RELAXED);
		progress = 1;
	}
	if (progress) {
		__atomic_store_n(&n->exec.applied, n->exec.idx - 1, __ATOMIC_RELAXED);
		report_applied(n);
	}
	return progress;
}

void node_forget_in_child(struct node *n)
{
	if (n->ops && n->tp && n->ops->forget)
		n->ops->forget(n->tp);
	metrics_forget_in_child();
}

static void *role_main(void *arg)
{
	struct node *n = arg;
	sigset_t all;

	/* Signals belong to the server's own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!__atomic_load_n(&n->stopping, __ATOMIC_RELAXED)) {
		switch (node_role(n)) {
		case ROLE_LEADER:
			leader_run(n, !__atomic_load_n(&n->serving, __ATOMIC_ACQUIRE));
			break;
		case ROLE_REMOVED: {
			/* No replica any more: the operator stops the process. */
			struct timespec t = { 0, 100 * 1000000L };
			node_update_status(n);
			nanosleep(&t, NULL);
			break;
		}
		case ROLE_DEPOSED:
			/* Deposed, or fenced out (backup.c): the reason is logged there. */
			pr_warn("re-executing this node's server to replay the log (view %llu)",
				(unsigned long long)n->view);
			if (node_reexec_hook)
				node_reexec_hook(n);	/* returns only if it failed */
			/* No way to re-execute (not inside a server): follow as is. */
			__atomic_store_n(&n->serving, 0, __ATOMIC_RELEASE);
			node_set_role(n, ROLE_BACKUP, -1, n->view);
			break;
		default:
			backup_run(n);
		}
	}
	return NULL;
}

/* The role a starting node takes.  A cluster that never ran starts in
 * view 0 led by node 0, at once.  A node with a past (a log, a view, a
 * vote, a recovery point) starts as a backup that knows no leader: it
 * follows whoever leads a view at least as new, or stands for election
 * when nobody does. */
static void node_pick_role(struct node *n, int recovered)
{
	uint64_t lv, li, end;
	struct durable *d = &n->ctl->dur;

	node_log_end(n, &lv, &li, &end);
	if ((recovered && (d->view || d->voted_view || li)) || n->exec.seed_idx) {
		if (!recovered)
			memset(d, 0, sizeof(*d));
		if (n->exec.view > d->view)
			d->view = n->exec.view;
		n->view = d->view;
		n->leader = -1;
		n->role = ROLE_BACKUP;
		pr_info("recovered view %llu and a log up to entry %llu (of view %llu); "
			"rebuilding the server from entry %llu on",
			(unsigned long long)d->view, (unsigned long long)li, (unsigned long long)lv,
			(unsigned long long)n->exec.idx);
		return;
	}
	memset(d, 0, sizeof(*d));
	n->view = 0;
	n->leader = 0;
	n->role = n->self == 0 ? ROLE_LEADER : ROLE_BACKUP;
	n->serving = n->self == 0;	/* nothing to execute first */
	n->lead.view_start = 1;
}

/* Loads the configuration (as the membership agreed since may have changed
 * it) and finds its transport.  0, or -1 (ERR). */
static int node_configure(struct node *n, const char *config_path, int self, char *err,
			  size_t errlen)
{
	char whose[128];

	if (self < 0 || members_config_load(config_path, self, &n->cfg, whose, sizeof(whose), err,
					    errlen))
		return -1;
	if (whose[0])
		pr_warn("%s does not name node %d: following the membership agreed since, from %s",
			n->cfg.path, self, whose);
	n->ops = transport_find(n->cfg.transport);
	if (!n->ops) {
		snprintf(err, errlen, "%s: transport '%s' is not available in this build",
			 n->cfg.path, n->cfg.transport);
		return -1;
	}
	return 0;
}

/* The fields that need no resource: who we are, the log's size, and how
 * long to spin (APUS_SPIN_US, APUS_SPIN_MAX_US) before sleeping. */
static void node_init_fields(struct node *n, int self)
{
	n->self = self;
	n->log_size = n->cfg.log_size;
	n->spin_ns = DEFAULT_SPIN_US * 1000ULL;
	n->started_ns = now_ns();
	n->exec.idx = 1;
	const char *spin = getenv("APUS_SPIN_US");
	if (spin && *spin)
		n->spin_ns = strtoull(spin, NULL, 10) * 1000ULL;
	spin = getenv("APUS_SPIN_MAX_US");
	n->spin_max_ns = (spin && *spin ? strtoull(spin, NULL, 10) : DEFAULT_SPIN_MAX_US) * 1000ULL;
	pthread_mutex_init(&n->lead.lock, NULL);
}

/* Maps the region, carrying over the durable log of a previous run
 * (*RECOVERED says whether there was one), and opens its durable copy.
 * 0, or -1 (ERR). */
static int node_map_region(struct node *n, int self, int *recovered, char *err, size_t errlen)
{
	struct region_origin origin;
	void *base;
	int rc;

	n->wal.fd = -1;
	rc = region_create(&n->cfg, self, &base, &n->region_fd, &origin);
	if (rc) {
		snprintf(err, errlen, "cannot create the region in %s: %s",
			 n->cfg.nodes[self].data_dir, strerror(-rc));
		return -1;
	}
	*recovered = origin.recovered;
	n->region = base;
	n->region_size = region_size_for(n->log_size);
	n->ctl = base;
	n->status = region_status(n->ctl);
	n->log = n->region + REGION_CTL_SIZE;
	rc = wal_open(&n->wal, &n->cfg, self, n->region, &origin);
	if (rc) {
		snprintf(err, errlen, "cannot keep the log's durable copy in %s: %s",
			 n->cfg.nodes[self].data_dir, strerror(-rc));
		return -1;
	}
	return 0;
}

/* A node the membership removed (or never added) keeps running, as no
 * replica: it replicates nothing and its server refuses clients. */
static void node_refuse_if_no_member(struct node *n, int self)
{
	if (node_is_member(n, self))
		return;
	pr_warn("node %d is no member of the cluster (%s): it replicates nothing and its "
		"server refuses clients", self, member_role_name(n->cfg.nodes[self].member));
	n->role = ROLE_REMOVED;
	n->leader = -1;
	n->serving = 0;
}

/* fsync = batch: the thread that makes the log durable every interval.
 * 0, or -1 (ERR). */
static int node_start_sync(struct node *n, char *err, size_t errlen)
{
	if (n->cfg.fsync != FSYNC_BATCH)
		return 0;
	if (pthread_create(&n->threads.sync, NULL, sync_main, n)) {
		snprintf(err, errlen, "cannot start the fsync thread");
		return -1;
	}
	n->threads.sync_started = 1;
	return 0;
}

/* A node that failed to start: the mapping stays, the CLI reads the error
 * from it.  The node struct goes unless a transport holds it (its threads
 * may run). */
static void node_start_failed(struct node *n, const char *err)
{
	if (n->ctl) {
		n->status->role = ROLE_FAILED;
		snprintf(n->status->error, sizeof(n->status->error), "%s", err);
		store64(&n->status->updated_ms, realtime_ms());
	}
	if (!n->tp)
		free(n);
}

struct node *node_start(const char *config_path, int self, char *err, size_t errlen)
{
	struct node *n = calloc(1, sizeof(*n));
	int rc, recovered = 0;

	if (!n) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* Now, in the server's constructor, before its main can rewrite
	 * environ under our threads (child_env.h). */
	if (child_env_capture()) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (node_configure(n, config_path, self, err, errlen))
		goto fail;
	node_init_fields(n, self);
	if (node_map_region(n, self, &recovered, err, errlen))
		goto fail;
	if (members_load(n, err, errlen))
		goto fail;
	/* A fresh server starts from the state the log starts from: a
	 * recovery point and the log after it, or the whole log; and nothing
	 * of its own (app_reset_cmd, told of the point: a server that keeps
	 * its state on disk loads the point there, slapd's slapadd). */
	node_snapshot_load(n);
	if (node_app_reset(n, err, errlen))
		goto fail;
	node_pick_role(n, recovered);
	node_refuse_if_no_member(n, self);
	node_snapshot_check(n);
	rc = n->ops->open(&n->cfg, self, n->region, n->region_size, &n->tp);
	if (rc) {
		snprintf(err, errlen, "transport %s failed to open: %s", n->ops->name, strerror(-rc));
		goto fail;
	}
	/* Every node may have to execute the log into its server some day. */
	n->exec.replay = replay_new(n);
	if (!n->exec.replay) {
		snprintf(err, errlen, "cannot set up replay: out of memory");
		goto fail;
	}
	node_checkpoint_init(n);
	n->elect.led_views = n->leader >= 0 ? n->view + 1 : 0;
	node_save_durable(n);
	node_update_status(n);
	if (node_start_sync(n, err, errlen))
		goto fail;
	/* Logged before the role thread exists: it changes role and view. */
	pr_info("node %d of %d starting as %s of view %llu (transport %s, log %llu bytes, fsync %s)",
		self, n->cfg.nnodes, role_label(n->role),
		(unsigned long long)n->view, n->ops->name, (unsigned long long)n->log_size,
		fsync_policy_name(n->cfg.fsync));
	if (pthread_create(&n->threads.role, NULL, role_main, n)) {
		snprintf(err, errlen, "cannot start the role thread");
		goto fail;
	}
	if (node_snapshot_start(n))
		pr_err("cannot start the snapshot thread: this node takes no snapshots");
	metrics_start(n);
	return n;
fail:
	node_start_failed(n, err);
	return NULL;
}
