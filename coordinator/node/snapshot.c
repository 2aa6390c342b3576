/* Every node snapshots itself: its recovery point (recovery.h) is the
 * log's base.  The leader reclaims no log that a majority's snapshots do
 * not cover (Raft's compaction rule), so any surviving majority can
 * rebuild the state however often the log wrapped, and a restart costs a
 * snapshot load plus the log after it, never the whole history.
 *
 * A snapshot must hold the server exactly at a known entry:
 * - a backup holds execution (its server has consumed every turn sent to
 *   it), runs snapshot_cmd, and goes on once the server forked (a
 *   fork-based snapshot such as Redis BGSAVE) or the command ended;
 * - the leader is never paused: read-ahead pauses (so the server has read
 *   every entry logged so far), snapshot_cmd runs, and the server's own
 *   fork (the shim's fork() calls node_snapshot_fork) captures the last
 *   entry logged, on the thread that also reads every client.  The leader
 *   therefore needs a fork-based snapshot_cmd; its snapshot counts once
 *   that entry is committed.
 * More than one fork while a snapshot is under way (a client's BGSAVE)
 * makes the state ambiguous: that snapshot is dropped and tried again.
 * A snapshot_cmd that reads the server instead of making it fork
 * (memcached's apps/memcached/snapshot.py) holds only on a backup: with
 * snapshot_leader = off the leader takes none.
 *
 * A server that loads nothing by itself at start (memcached) is given its
 * recovery point by snapshot_load_cmd, which this thread runs first, once
 * the server listens; the node executes nothing until it succeeded (a
 * failure is retried: the command must be one that can run twice). */
#define LOG_PREFIX "snapshot: "
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "coordinator/node/child_env.h"
#include "coordinator/input/input_random.h"
#include "common/logger.h"
#include "coordinator/node/members.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/recovery.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/node/replay.h"
#include "coordinator/storage/sessions.h"
#include "common/sys.h"


#define TICK_NS (100 * 1000000ULL)
#define HOLD_WAIT_NS (5ULL * 1000000000ULL)	/* for the role thread to hold */
#define DRAIN_MAX_NS (2ULL * 1000000000ULL)	/* for the server to take its turns */
/* For the server to answer what it read (a whole request is answered in
 * microseconds; the first part of one is not, while we hold its rest). */
#define ANSWER_WAIT_NS (200 * 1000000ULL)
/* Points refused for requests mid-read this long in a row: a client that
 * keeps the server reading without answers (memcached's noreply sets) and
 * no recovery point at all would stop writes once the log is full.  One
 * is taken then, and the log says which connection it may cut. */
#define MID_REQUEST_GIVE_UP_NS (5ULL * 1000000000ULL)
#define MID_REQUEST_RUN_NS (1000000000ULL)
#define CMD_MAX_NS (600ULL * 1000000000ULL)
#define COMMIT_WAIT_NS (10ULL * 1000000000ULL)
#define RETRY_MIN_NS (1000000000ULL)
#define RETRY_MAX_NS (30ULL * 1000000000ULL)

static int input_pending(struct node *n)
{
	int (*f)(void) = __atomic_load_n(&n->snap.input_pending, __ATOMIC_ACQUIRE);

	return f && f();
}

static int snap_state(struct node *n)
{
	return __atomic_load_n(&n->snap.state, __ATOMIC_ACQUIRE);
}

static void set_snap_state(struct node *n, int s)
{
	__atomic_store_n(&n->snap.state, s, __ATOMIC_RELEASE);
}

static void publish(struct node *n, const struct recovery_point *rp)
{
	__atomic_store_n(&n->snap.idx, rp->index, __ATOMIC_RELEASE);
	__atomic_store_n(&n->snap.pos, rp->log_pos, __ATOMIC_RELEASE);
	store64(&n->status->snap_idx, rp->index);
	store64(&n->status->snap_pos, rp->log_pos);
}

void node_snapshot_load(struct node *n)
{
	struct recovery_point rp;
	int rc = recovery_load(&n->cfg, n->self, &rp);

	if (recovery_install(&n->cfg, n->self, rc == 0))
		pr_perror("cannot put the recovery point's snapshot in place");
	if (rc)
		return;
	if (n->cfg.snapshot_load_cmd[0])
		__atomic_store_n(&n->snap.loading, 1, __ATOMIC_RELEASE);
	n->exec.idx = rp.index + 1;
	n->exec.pos = rp.log_pos;
	n->exec.view = rp.view;
	n->exec.applied = rp.index;
	n->exec.seed_idx = rp.index;
	input_random_resume(rp.rand_mark);
	publish(n, &rp);
	pr_info("starting from the recovery point: the server loads its snapshot at entry %llu "
		"(view %llu); executing from entry %llu on",
		(unsigned long long)rp.index, (unsigned long long)rp.view,
		(unsigned long long)rp.index + 1);
}

void node_snapshot_reload(struct node *n)
{
	struct recovery_point rp;

	if (recovery_load(&n->cfg, n->self, &rp) ||
	    rp.log_pos <= __atomic_load_n(&n->snap.pos, __ATOMIC_ACQUIRE))
		return;
	publish(n, &rp);
	pr_info("the recovery point on disk (entry %llu) is newer than the one this process "
		"remembers: it is what a restart loads, and what counts for the log's reclamation",
		(unsigned long long)rp.index);
}

void node_snapshot_check(struct node *n)
{
	uint64_t hint = __atomic_load_n(&n->ctl->hint.idx, __ATOMIC_RELAXED);
	uint64_t pos = n->exec.pos;
	int ok = hint < n->exec.idx || node_entry_at(n, &pos, n->exec.idx);

	__atomic_store_n(&n->snap.recoverable, ok, __ATOMIC_RELEASE);
	n->status->recoverable = (uint32_t)ok;
	if (!ok)
		pr_err("this node cannot rebuild its server's state: its log holds entries up to %llu "
		       "but no longer entry %llu, the first its server has not executed (its state "
		       "is at entry %llu); it will not stand for election (rebuild it from a peer: "
		       "apus rebuild --node %d)",
		       (unsigned long long)hint, (unsigned long long)n->exec.idx,
		       (unsigned long long)n->exec.idx - 1, n->self);
}

static int loading(struct node *n)
{
	return __atomic_load_n(&n->snap.loading, __ATOMIC_ACQUIRE);
}

int node_snapshot_holds(struct node *n)
{
	int s = snap_state(n);

	return s == SNAP_HOLD || s == SNAP_HELD || loading(n);
}

int node_snapshot_loading(struct node *n)
{
	return loading(n) && !__atomic_load_n(&n->snap.load_failures, __ATOMIC_ACQUIRE);
}

/* A checkpoint waits too while the recovery point is loaded: an image of
 * a half-loaded server would be tied to no entry. */
int node_snapshot_running(struct node *n)
{
	return snap_state(n) != SNAP_IDLE || loading(n);
}

/* A point where a client had a request read in part (WHICH says who) is
 * refused (but with snapshot_connections = stateless), unless points have
 * been refused for that for
 * MID_REQUEST_GIVE_UP_NS in a row: then 0, and the log says so.  (A run
 * ends with a point taken, or a second without refusals: our checks and
 * snapshot_cmd's may refuse in turn, so one passing does not end it.) */
static int mid_request_refused(struct node *n, const char *which, uint64_t idx)
{
	uint64_t now = now_ns();

	/* Its requests leave nothing behind: a point may cut one. */
	if (n->cfg.snapshot_connections == SNAPSHOT_CONNECTIONS_STATELESS)
		return 0;

	/* (In a row: the last refusal a moment ago.) */
	if (!n->snap.mid_since_ns || now - n->snap.mid_last_ns > MID_REQUEST_RUN_NS)
		n->snap.mid_since_ns = now;
	n->snap.mid_last_ns = now;
	if (now - n->snap.mid_since_ns < MID_REQUEST_GIVE_UP_NS)
		return 1;
	pr_warn("a recovery point at entry %llu although %s: refused for %llu s in a row; a "
		"restart from it loses such a request", (unsigned long long)idx, which,
		(unsigned long long)(MID_REQUEST_GIVE_UP_NS / 1000000000ULL));
	n->snap.mid_since_ns = 0;
	return 0;
}

/* WHICH for mid_request_refused(): MID connections, VS one of them. */
static const char *mid_conns(char *buf, size_t len, int mid, struct viewstamp vs)
{
	snprintf(buf, len, "%d connection%s had a request read in part (connection %llu.%llu)",
		 mid, mid == 1 ? "" : "s", (unsigned long long)vs.view, (unsigned long long)vs.idx);
	return buf;
}

/* The held server has taken every turn: has it answered what it read?
 * A snapshot holds its data, not its buffers, so a request it has read
 * only the first part of would be lost on a node restarting from there
 * (the rest replayed alone).  It is given ANSWER_WAIT_NS, then the point
 * is refused (snap.mid_conns).  0: wait on.  Role thread. */
static int hold_answered(struct node *n)
{
	struct viewstamp vs = { 0, 0 };
	int mid = replay_mid_requests(n->exec.replay, &vs);

	n->snap.mid_conns = 0;
	if (!mid)
		return 1;
	if (now_ns() - n->snap.drained_ns < ANSWER_WAIT_NS)
		return 0;
	char which[128];

	if (mid_request_refused(n, mid_conns(which, sizeof(which), mid, vs), n->snap.cap_idx)) {
		n->snap.mid_conns = mid;
		n->snap.mid_vs = vs;
	}
	return 1;
}

void node_snapshot_poll(struct node *n)
{
	if (snap_state(n) != SNAP_HOLD) {
		n->snap.hold_ns = 0;	/* a hold the snapshot thread gave up on */
		n->snap.drained_ns = 0;
		return;
	}
	if (node_role(n) != ROLE_BACKUP || n->ckpt.hold) {
		set_snap_state(n, SNAP_FAILED);
		return;
	}
	if (!n->snap.hold_ns)
		n->snap.hold_ns = now_ns();
	/* The server must have taken every turn sent to it: then it holds
	 * exactly the entries up to exec.idx - 1. */
	if (replay_maintain(n->exec.replay)) {
		if (now_ns() - n->snap.hold_ns > DRAIN_MAX_NS) {
			n->snap.hold_ns = 0;
			set_snap_state(n, SNAP_FAILED);
		}
		return;
	}
	n->snap.cap_idx = n->exec.idx - 1;
	if (!n->snap.drained_ns)
		n->snap.drained_ns = now_ns();
	if (!hold_answered(n))
		return;
	n->snap.hold_ns = 0;
	n->snap.drained_ns = 0;
	/* snapshot_connections = none: no point where a client is connected
	 * (take() zeroed snap.open_conns before it asked). */
	if (n->cfg.snapshot_connections == SNAPSHOT_CONNECTIONS_NONE)
		n->snap.open_conns = replay_open_conns(n->exec.replay);
	if (n->snap.open_conns || n->snap.mid_conns) {
		set_snap_state(n, SNAP_FAILED);
		return;
	}
	n->snap.cap_pos = n->exec.pos;
	n->snap.cap_view = n->exec.view;
	__atomic_store_n(&n->snap.forks, 0, __ATOMIC_RELAXED);
	set_snap_state(n, SNAP_HELD);	/* pairs with the acquire in wait_state() */
}

int node_snapshot_armed(struct node *n)
{
	return snap_state(n) == SNAP_ARMED;
}

int node_snapshot_fork(struct node *n)
{
	int s = snap_state(n);

	/* A guard holds us for a snapshot of its own (apus rebuild): its
	 * command, on the admin socket, makes this fork; not the server's. */
	if (__atomic_load_n(&n->ckpt.hold, __ATOMIC_ACQUIRE))
		return 1;
	if (s != SNAP_HELD && s != SNAP_ARMED && s != SNAP_FORKED)
		return 0;
	__atomic_add_fetch(&n->snap.forks, 1, __ATOMIC_ACQ_REL);
	/* The server's thread, at the state the snapshot holds. */
	if (s != SNAP_FORKED)
		n->snap.cap_rand = input_random_mark();
	if (s == SNAP_ARMED) {
		/* On the server's thread, inside its snapshot command: every
		 * entry logged so far was read, unless read-ahead bytes wait. */
		pthread_mutex_lock(&n->lead.lock);
		n->snap.cap_idx = input_pending(n) ? 0 : n->lead.last_idx;
		n->snap.cap_pos = n->lead.tail;
		n->snap.cap_view = n->view;
		pthread_mutex_unlock(&n->lead.lock);
	}
	if (s != SNAP_FORKED)
		set_snap_state(n, SNAP_FORKED);
	return 1;
}

uint64_t node_snapshot_floor(struct node *n)
{
	uint64_t pos[APUS_MAX_NODES];
	int cnt = 0, quorum = __atomic_load_n(&n->quorum, __ATOMIC_ACQUIRE);

	if (!n->cfg.snapshot_cmd[0])
		return UINT64_MAX;
	/* The voters': a majority of them is what can come back. */
	for (int k = 0; k < n->cfg.nnodes; k++)
		if (node_votes(n, k))
			pos[cnt++] = k == n->self ? __atomic_load_n(&n->snap.pos, __ATOMIC_ACQUIRE)
						  : load64(&n->ctl->peer[k].snap_pos);
	if (cnt < quorum)
		return 0;
	/* Insertion sort, descending: at most 8 values. */
	for (int i = 1; i < cnt; i++)
		for (int j = i; j > 0 && pos[j] > pos[j - 1]; j--) {
			uint64_t t = pos[j];
			pos[j] = pos[j - 1];
			pos[j - 1] = t;
		}
	return pos[quorum - 1];
}

static int stopping(struct node *n)
{
	return __atomic_load_n(&n->stopping, __ATOMIC_RELAXED);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

	nanosleep(&ts, NULL);
}

/* Waits until the state leaves FROM; returns the new one (FROM on timeout). */
static int wait_state(struct node *n, int from, uint64_t max_ns)
{
	uint64_t start = now_ns();
	int s;

	while ((s = snap_state(n)) == from && now_ns() - start < max_ns && !stopping(n))
		sleep_ns(1000000);
	return s;
}

/* Runs the command template CMD_T (snapshot_cmd, snapshot_load_cmd or
 * app_reset_cmd;
 * sh -c, expanded) and returns its exit status, or -1.  The server reaps
 * children of its own (Redis waits for any pid while its BGSAVE child
 * runs), so the command runs under an outer sh that reports its status
 * through a pipe: whoever reaps the outer sh, we learn it. */
static int run_cmd(struct node *n, const char *cmd_t, const char *what)
{
	char cmd[8192], *env[1024], line[16] = "", config[PATH_MAX + 16], node[48];
	char sessions[PATH_MAX + 32] = SESSIONS_ENV "=";
	char point[PATH_MAX + 32] = RECOVERY_POINT_ENV "=";
	char *extra[] = { config, node, NULL, NULL };
	int pfd[2], status = -1;
	posix_spawn_file_actions_t fa;
	pid_t pid;

	/* Names the node, for those that end the command if our server dies
	 * before it ends (child_env.h). */
	snprintf(config, sizeof(config), "APUS_CONFIG=%s", n->cfg.path);
	snprintf(node, sizeof(node), CHILD_ENV_NODE "=%d", n->self);
	/* snapshot_cmd: where it may name the clients' sessions (sessions.h). */
	size_t at = strlen(sessions);
	if (cmd_t == n->cfg.snapshot_cmd &&
	    !config_node_path(&n->cfg, n->self, SESSIONS_NEW, sessions + at, sizeof(sessions) - at)) {
		unlink(sessions + at);	/* a crashed command's */
		extra[2] = sessions;
	}
	/* app_reset_cmd of a node that starts from a recovery point: its
	 * snapshot_file, in place (node_snapshot_load ran first). */
	at = strlen(point);
	if (cmd_t == n->cfg.app_reset_cmd && n->exec.seed_idx && n->cfg.snapshot_file[0] &&
	    !config_node_path(&n->cfg, n->self, n->cfg.snapshot_file, point + at,
			      sizeof(point) - at))
		extra[2] = point;
	if (config_expand(&n->cfg, n->self, cmd_t, cmd, sizeof(cmd))) {
		pr_err("%s is too long once expanded", what);
		return -1;
	}
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	char *argv[] = { "sh", "-c", "sh -c \"$1\" </dev/null 3>&-; echo $? >&3", "apus-snapshot",
			 cmd, NULL };
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 3);
	posix_spawn_file_actions_addclosefrom_np(&fa, 4);
	/* Its own session (and process group): a stop or the time limit
	 * ends the command's whole tree, not only the outer sh; and what is
	 * left of it after the server died does not keep the server's
	 * session id, its pid, taken (a CRIU restore of the server needs
	 * that pid back: "Can't fork for PID: File exists").  What is left
	 * of it then is found by its environment instead (CHILD_ENV_NODE)
	 * and ended before the node's next server starts. */
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	int rc = child_env_build(env, sizeof(env) / sizeof(env[0]), extra) < 0 ? E2BIG :
		 posix_spawnp(&pid, "sh", &fa, &attr, argv, env);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	sys.close(pfd[1]);
	if (rc) {
		errno = rc;
		pr_perror("cannot run %s", what);
		sys.close(pfd[0]);
		return -1;
	}
	uint64_t start = now_ns();
	size_t got = 0;
	for (;;) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		if (stopping(n) || now_ns() - start > CMD_MAX_NS) {
			kill(-pid, SIGKILL);
			break;
		}
		if (sys.poll(&p, 1, 100) <= 0)
			continue;
		ssize_t r = sys.read(pfd[0], line + got, sizeof(line) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof(line) - 1)
			break;
	}
	sys.close(pfd[0]);
	sys.wait4(pid, NULL, 0, NULL);	/* ECHILD if the server reaped it */
	line[got] = '\0';
	if (got)
		status = atoi(line);
	return status;
}

static int file_newer(const char *path, const struct timespec *since, struct stat *st)
{
	if (stat(path, st) < 0)
		return 0;
	return st->st_mtim.tv_sec > since->tv_sec ||
	       (st->st_mtim.tv_sec == since->tv_sec && st->st_mtim.tv_nsec >= since->tv_nsec);
}

static int wait_committed(struct node *n, uint64_t idx)
{
	uint64_t start = now_ns();

	while (__atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) < idx) {
		if (node_role(n) != ROLE_LEADER || stopping(n) || now_ns() - start > COMMIT_WAIT_NS)
			return 0;
		sleep_ns(1000000);
	}
	return 1;
}

/* take()'s answer when the moment did not suit (snapshot_connections =
 * none and clients were connected, or a request was read in part):
 * another entry may, soon. */
#define SNAP_TRY_SOON (-2)
/* snapshot_cmd's exit status for "complete, but a client was in the middle
 * of a request or a transaction at the fork" (EX_TEMPFAIL): the server
 * knows, where our own checks guess (apps/redis/snapshot.sh). */
#define SNAPSHOT_CMD_CUT 75
#define TRY_SOON_NS (100 * 1000000ULL)

/* The leader's fork cut a client's request (preload/answers.c): 1
 * with WHY, unless refusals gave up (mid_request_refused). */
static int leader_point_cut(struct node *n, char *why, size_t whylen)
{
	int (*f)(struct viewstamp *) = __atomic_load_n(&n->snap.point_cut, __ATOMIC_ACQUIRE);
	struct viewstamp vs = { 0, 0 };
	int cut = f ? f(&vs) : 0;

	if (!cut)
		return 0;
	char which[128];

	if (!mid_request_refused(n, mid_conns(which, sizeof(which), cut, vs), n->snap.cap_idx))
		return 0;
	snprintf(why, whylen, "%d client connection%s read in part at the fork, at entry %llu "
		 "(connection %llu.%llu): a recovery point there would cut it", cut,
		 cut == 1 ? " had its request" : "s had their requests",
		 (unsigned long long)n->snap.cap_idx, (unsigned long long)vs.view,
		 (unsigned long long)vs.idx);
	return 1;
}

/* The leader is never paused: read-ahead pauses instead, and the server
 * must have read every entry logged so far before snapshot_cmd makes it
 * fork.  0 (read-ahead paused), or -1 (WHY). */
static int pause_leader(struct node *n, char *why, size_t whylen)
{
	if (!node_serving(n)) {
		snprintf(why, whylen, "the leader is not serving yet");
		return -1;
	}
	__atomic_store_n(&n->snap.forks, 0, __ATOMIC_RELAXED);
	set_snap_state(n, SNAP_ARMED);	/* read-ahead pauses */
	for (uint64_t t0 = now_ns(); input_pending(n);) {
		if (now_ns() - t0 > DRAIN_MAX_NS) {
			set_snap_state(n, SNAP_IDLE);
			snprintf(why, whylen, "the server left read-ahead bytes unread");
			return -1;
		}
		sleep_ns(1000000);
	}
	return 0;
}

/* Has the role thread hold a backup's execution once its server took
 * every turn sent to it.  0 (held), or -1 or SNAP_TRY_SOON (WHY): a
 * client's request read in part, or a session snapshot_connections = none
 * would lose, is a moment that does not suit. */
static int hold_backup(struct node *n, char *why, size_t whylen)
{
	int s;

	n->snap.open_conns = 0;	/* the role thread's answers, before it holds */
	n->snap.mid_conns = 0;
	set_snap_state(n, SNAP_HOLD);
	n->ops->ring(n->tp, n->self);
	s = wait_state(n, SNAP_HOLD, HOLD_WAIT_NS);
	if (s != SNAP_HELD && n->snap.mid_conns) {
		set_snap_state(n, SNAP_IDLE);
		snprintf(why, whylen, "%d client connection%s input unanswered at entry %llu "
			 "(connection %llu.%llu): a recovery point there would cut a request "
			 "read in part", n->snap.mid_conns,
			 n->snap.mid_conns == 1 ? " had its" : "s had their",
			 (unsigned long long)n->snap.cap_idx,
			 (unsigned long long)n->snap.mid_vs.view,
			 (unsigned long long)n->snap.mid_vs.idx);
		return SNAP_TRY_SOON;
	}
	if (s != SNAP_HELD && n->snap.open_conns) {
		set_snap_state(n, SNAP_IDLE);
		snprintf(why, whylen, "%d client connection%s open at entry %llu: a recovery "
			 "point there would lose %s session (snapshot_connections = none)",
			 n->snap.open_conns, n->snap.open_conns == 1 ? " was" : "s were",
			 (unsigned long long)n->snap.cap_idx,
			 n->snap.open_conns == 1 ? "its" : "their");
		return SNAP_TRY_SOON;
	}
	if (s != SNAP_HELD) {
		set_snap_state(n, SNAP_IDLE);
		snprintf(why, whylen, "%s", s == SNAP_HOLD ? "the role thread did not hold"
					: "its server did not take its turns in time, or a "
					  "checkpoint was under way");
		return -1;
	}
	return 0;
}

/* Whether what snapshot_cmd left (its exit STATUS, the snapshot state S
 * it left, the server's FORKS meanwhile) is the state at RP's entry.  0,
 * or -1 or SNAP_TRY_SOON (WHY). */
static int point_holds(struct node *n, int leader, int status, int s, int forks,
		       const struct recovery_point *rp, char *why, size_t whylen)
{
	if (status && status != SNAPSHOT_CMD_CUT) {
		snprintf(why, whylen, "snapshot_cmd exited with %d", status);
		return -1;
	}
	if (forks > 1) {
		snprintf(why, whylen, "the server forked %d times meanwhile (someone else's "
				      "snapshot?): which state the file holds is unknown", forks);
		return -1;
	}
	if (leader && s != SNAP_FORKED) {
		snprintf(why, whylen, "snapshot_cmd did not make the server fork: the leader's "
				      "state is tied to an entry only by a fork-based snapshot "
				      "(apps/redis/snapshot.sh: BGSAVE)");
		return -1;
	}
	if (leader && !rp->index) {
		snprintf(why, whylen, "read-ahead bytes waited at the fork");
		return -1;
	}
	if (leader && leader_point_cut(n, why, whylen))
		return SNAP_TRY_SOON;
	if (status == SNAPSHOT_CMD_CUT &&
	    mid_request_refused(n, "snapshot_cmd saw a client mid-request or mid-transaction "
			       "at the fork", rp->index)) {
		snprintf(why, whylen, "snapshot_cmd exited %d at entry %llu: the server had a "
			 "client's request read in part, or a transaction open (its message is in "
			 "apus.log): a recovery point there would cut it", SNAPSHOT_CMD_CUT,
			 (unsigned long long)rp->index);
		return SNAP_TRY_SOON;
	}
	return 0;
}

/* Keeps the snapshot file PATH as the node's recovery point RP, with the
 * clients' sessions first: a committed point has its file.  Their
 * descriptors are the fork's (no fork, FORKS 0: none can be named).  0,
 * or -1 (WHY). */
static int keep_point(struct node *n, const char *path, struct recovery_point *rp, int forks,
		      char *why, size_t whylen)
{
	int rc = sessions_keep(&n->cfg, n->self, rp->index,
			       forks == 1 ? __atomic_load_n(&n->snap.point_conn, __ATOMIC_ACQUIRE)
					  : NULL);
	if (rc < 0) {
		snprintf(why, whylen, "cannot keep the clients' sessions: %s", strerror(-rc));
		return -1;
	}
	rc = recovery_commit(&n->cfg, n->self, path, rp);
	if (rc) {
		snprintf(why, whylen, "cannot keep it as the recovery point: %s", strerror(-rc));
		return -1;
	}
	sessions_prune(&n->cfg, n->self, rp->index);
	publish(n, rp);
	store64(&n->status->snap_bytes, rp->bytes);
	pr_info("snapshot at entry %llu (%.1f MB): the recovery point", (unsigned long long)rp->index,
		(double)rp->bytes / 1e6);
	return 0;
}

/* Takes one snapshot of this node.  0, or -1 or SNAP_TRY_SOON (with WHY). */
static int take(struct node *n, char *why, size_t whylen)
{
	int leader = node_role(n) == ROLE_LEADER;
	struct timespec started;
	char path[PATH_MAX];
	struct stat st;
	int s, status, rc;

	n->snap.cap_rand = UINT64_MAX;	/* unknown unless the server forks */
	rc = leader ? pause_leader(n, why, whylen) : hold_backup(n, why, whylen);
	if (rc)
		return rc;
	sys.clock_gettime(CLOCK_REALTIME_COARSE, &started);
	status = run_cmd(n, n->cfg.snapshot_cmd, "snapshot_cmd");
	s = snap_state(n);
	set_snap_state(n, SNAP_IDLE);	/* execution and read-ahead go on */
	struct recovery_point rp = { n->snap.cap_idx, n->snap.cap_pos, n->snap.cap_view, 0,
				     n->snap.cap_rand };
	int forks = __atomic_load_n(&n->snap.forks, __ATOMIC_ACQUIRE);
	rc = point_holds(n, leader, status, s, forks, &rp, why, whylen);
	if (rc)
		return rc;
	if (config_node_path(&n->cfg, n->self, n->cfg.snapshot_file, path, sizeof(path)) ||
	    !file_newer(path, &started, &st)) {
		snprintf(why, whylen, "snapshot_cmd did not write %.200s", path);
		return -1;
	}
	/* A leader's snapshot may hold entries not yet committed: it counts
	 * once they are (a deposed leader's server must not come back with
	 * what the new view lost). */
	if (leader && !wait_committed(n, rp.index)) {
		snprintf(why, whylen, "entry %llu did not commit while we led",
			 (unsigned long long)rp.index);
		return -1;
	}
	return keep_point(n, path, &rp, forks, why, whylen);
}

/* Whether someone asked for a recovery point now (SNAPSHOT_REQUEST_FILE);
 * the request is taken. */
static int requested(struct node *n)
{
	char path[PATH_MAX];

	if (config_node_path(&n->cfg, n->self, SNAPSHOT_REQUEST_FILE, path, sizeof(path)) ||
	    unlink(path) < 0)
		return 0;
	return 1;
}

/* Whether this node is due for a snapshot: its log went snapshot_log_bytes
 * past its recovery point, or snapshot_interval_s passed with progress. */
static int due(struct node *n, uint64_t last_ns)
{
	int leader = node_role(n) == ROLE_LEADER;
	uint64_t end, top, snap = __atomic_load_n(&n->snap.pos, __ATOMIC_ACQUIRE);

	if (leader) {
		if (!node_serving(n) || !n->cfg.snapshot_leader)
			return 0;
		end = __atomic_load_n(&n->lead.tail, __ATOMIC_ACQUIRE);
		top = __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE);
	} else {
		if (node_role(n) != ROLE_BACKUP || !n->status->synced || n->ckpt.hold)
			return 0;
		end = __atomic_load_n(&n->exec.pos, __ATOMIC_RELAXED);
		top = __atomic_load_n(&n->exec.applied, __ATOMIC_RELAXED);
	}
	if (requested(n))
		n->snap.asked = 1;
	if (top <= __atomic_load_n(&n->snap.idx, __ATOMIC_ACQUIRE)) {
		n->snap.asked = 0;	/* the point there is as new as it gets */
		return 0;
	}
	if (n->snap.asked)
		return 1;
	if (end >= snap && end - snap >= n->cfg.snapshot_log_bytes)
		return 1;
	return n->cfg.snapshot_interval_s &&
	       now_ns() - last_ns >= (uint64_t)n->cfg.snapshot_interval_s * 1000000000ULL;
}

static void set_error(struct node *n, const char *why)
{
	snprintf(n->status->snap_error, sizeof(n->status->snap_error), "%s", why);
	store64(&n->status->snap_error_ms, realtime_ms());
}

static uint64_t next_retry(uint64_t retry_ns)
{
	return retry_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS : retry_ns * 2;
}

/* The identity of snapshot_file into *ST: 0, or -1. */
static int snapshot_file_id(struct node *n, struct stat *st)
{
	char path[PATH_MAX];

	return config_node_path(&n->cfg, n->self, n->cfg.snapshot_file, path, sizeof(path)) ||
			       stat(path, st) < 0
		       ? -1
		       : 0;
}

/* Puts the recovery point the node started from into its server
 * (snapshot_load_cmd), once the server listens; execution waits until it
 * succeeded, retried with back-off while it fails.  The command reads
 * snapshot_file, which anyone's snapshot_cmd may rename a file over (one
 * our previous server left running: child_env.h): each try puts the
 * recovery point's there first, and a try counts only if the file is
 * still that one once the command ended. */
static void load(struct node *n)
{
	uint64_t retry_ns = RETRY_MIN_NS, idx = __atomic_load_n(&n->snap.idx, __ATOMIC_ACQUIRE);
	char why[256];

	while (!stopping(n)) {
		if (!node_server_up(n)) {
			sleep_ns(TICK_NS / 10);
			continue;
		}
		uint64_t t0 = now_ns();
		struct stat before, after;
		int status = recovery_install(&n->cfg, n->self, 1) || snapshot_file_id(n, &before)
				     ? -1
				     : run_cmd(n, n->cfg.snapshot_load_cmd, "snapshot_load_cmd");
		int replaced = !status && (snapshot_file_id(n, &after) ||
					   after.st_ino != before.st_ino ||
					   after.st_dev != before.st_dev);
		if (!status && !replaced) {
			pr_info("snapshot_load_cmd put the recovery point (entry %llu) into the server "
				"in %llu ms: executing from entry %llu on",
				(unsigned long long)idx, (unsigned long long)(now_ns() - t0) / 1000000,
				(unsigned long long)idx + 1);
			n->status->snap_error[0] = '\0';
			__atomic_store_n(&n->snap.loading, 0, __ATOMIC_RELEASE);
			return;
		}
		if (replaced)
			snprintf(why, sizeof(why), "snapshot_file was replaced while snapshot_load_cmd "
				 "read it: the server may not hold its recovery point (entry %llu), so "
				 "it executes nothing", (unsigned long long)idx);
		else
			snprintf(why, sizeof(why), "snapshot_load_cmd exited with %d: the server does "
				 "not hold its recovery point (entry %llu) yet, so it executes nothing",
				 status, (unsigned long long)idx);
		set_error(n, why);
		__atomic_add_fetch(&n->snap.load_failures, 1, __ATOMIC_ACQ_REL);
		pr_warn("%s; trying again in %llu s", why,
			(unsigned long long)(retry_ns / 1000000000ULL));
		for (uint64_t until = now_ns() + retry_ns; now_ns() < until && !stopping(n);)
			sleep_ns(TICK_NS);
		retry_ns = next_retry(retry_ns);
	}
}

static void *snap_main(void *arg)
{
	struct node *n = arg;
	uint64_t last_ns = now_ns(), retry_ns = RETRY_MIN_NS, next_ns = 0, quiet_said_ns = 0;
	char why[256];
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (loading(n))
		load(n);
	while (!stopping(n)) {
		sleep_ns(TICK_NS);
		if (now_ns() < next_ns || !due(n, last_ns))
			continue;
		uint64_t t0 = now_ns();
		int rc = take(n, why, sizeof(why));
		if (rc == SNAP_TRY_SOON) {
			/* A recovery point waits for an entry with no client
			 * connected, or none mid-request: look again soon,
			 * saying so now and then. */
			set_error(n, why);
			if (t0 - quiet_said_ns > RETRY_MAX_NS) {
				pr_info("no snapshot yet: %s", why);
				quiet_said_ns = t0;
			}
			next_ns = now_ns() + TRY_SOON_NS;
			continue;
		}
		if (rc) {
			/* For apus status: why this node has no newer recovery point. */
			set_error(n, why);
			n->snap.asked = 0;
			if (!n->status->snap_failures++ || retry_ns >= RETRY_MAX_NS)
				pr_warn("snapshot failed (%s); trying again in %llu s", why,
					(unsigned long long)(retry_ns / 1000000000ULL));
			next_ns = now_ns() + retry_ns;
			retry_ns = next_retry(retry_ns);
			continue;
		}
		last_ns = now_ns();
		retry_ns = RETRY_MIN_NS;
		n->snap.mid_since_ns = 0;
		n->snap.asked = 0;
		n->status->snap_failures = 0;
		n->status->snap_error[0] = '\0';
		n->status->snap_count++;
		n->status->snap_ms = (last_ns - t0) / 1000000;
	}
	return NULL;
}

int node_snapshot_start(struct node *n)
{
	if (!n->cfg.snapshot_cmd[0])
		return 0;
	if (pthread_create(&n->threads.snap, NULL, snap_main, n))
		return -1;
	n->threads.snap_started = 1;
	return 0;
}

int node_app_reset(struct node *n, char *err, size_t errlen)
{
	uint64_t t0 = now_ns();
	int status;

	if (!n->cfg.app_reset_cmd[0])
		return 0;
	status = run_cmd(n, n->cfg.app_reset_cmd, "app_reset_cmd");
	if (status) {
		snprintf(err, errlen, "app_reset_cmd exited with %d: the server's state is not the "
			 "one the log starts from", status);
		return -1;
	}
	if (n->exec.seed_idx)
		pr_info("app_reset_cmd put back the recovery point's state (entry %llu) in %llu ms",
			(unsigned long long)n->exec.seed_idx,
			(unsigned long long)(now_ns() - t0) / 1000000);
	else
		pr_info("app_reset_cmd put back the server's initial state in %llu ms",
			(unsigned long long)(now_ns() - t0) / 1000000);
	return 0;
}
