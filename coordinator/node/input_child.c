/* Background children as inputs of the log (input_child.h): the children
 * forked in windows, the ends a backup keeps until its log says so, and
 * the leader's ENTRY_CHILD. */
#include "coordinator/node/input_child.h"

#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

#include "common/clock.h"
#include "coordinator/storage/entry.h"
#include "coordinator/input/input_clock.h"
#include "common/logger.h"
#include "coordinator/node/node.h"
#include "common/sys.h"

#define MAX_CHILDREN 64

struct child {
	pid_t pid;
	uint64_t forked_at;	/* the entry whose window forked it */
	int ended;		/* reaped by us, not yet told to the server */
	int released;		/* its end goes to the server whenever it asks */
	int exit_told;		/* leader: its exit is logged (ENTRY_CHILD_EXIT) */
	uint64_t ended_ns;
	int status;
	struct rusage ru;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct child kids[MAX_CHILDREN];
static int nkids;
/* Children whose exit is not logged yet: the leader's inputs look for
 * exits only while there are some. */
static int untold;
/* Backup: the ENTRY_CHILD the replay stands at (due_at: the child's F;
 * 0: none), and whether the server has had that end. */
static uint64_t due_at, due_idx, due_stamp;
static int due_taken;
/* When the replay last saw the due child still running here (0: never;
 * the first time, it says it waits). */
static uint64_t due_running_ns;

static struct child *by_pid(pid_t pid)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i].pid == pid)
			return &kids[i];
	return NULL;
}

static struct child *by_fork(uint64_t forked_at)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i].forked_at == forked_at)
			return &kids[i];
	return NULL;
}

/* An ended child of PID's set (-1: any) kept for the server, or NULL. */
static struct child *ended_of(pid_t pid)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i].ended && (pid == -1 || kids[i].pid == pid))
			return &kids[i];
	return NULL;
}

/* Backup: an end the server may have now, whatever the log says: its
 * entry timed out, or none came for CHILD_KEEP_NS (the leader learned it
 * where the log does not say: a safety net, logged). */
static struct child *released_of(pid_t pid)
{
	uint64_t now = now_ns();

	for (int i = 0; i < nkids; i++) {
		struct child *k = &kids[i];
		if (!k->ended || (pid != -1 && k->pid != pid))
			continue;
		if (!k->released && now - k->ended_ns > CHILD_KEEP_NS) {
			pr_warn("no entry of the log says when child %d (forked at entry %llu) ended: "
				"the server learns it now", (int)k->pid,
				(unsigned long long)k->forked_at);
			k->released = 1;
		}
		if (k->released)
			return k;
	}
	return NULL;
}

static void ended(struct child *k, int st, const struct rusage *r)
{
	k->ended = 1;
	k->ended_ns = now_ns();
	k->status = st;
	k->ru = *r;
}

/* Whether our child PID still runs: neither reaped nor ended (a zombie). */
static int runs(pid_t pid)
{
	siginfo_t si = { 0 };

	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

static void forget(struct child *k)
{
	if (!k->exit_told)
		__atomic_sub_fetch(&untold, 1, __ATOMIC_RELAXED);
	*k = kids[--nkids];
}

/* Hands K's end to the server (under lock): wait4's results. */
static pid_t hand_over(struct child *k, int *status, struct rusage *ru)
{
	pid_t pid = k->pid;

	if (status)
		*status = k->status;
	if (ru)
		*ru = k->ru;
	forget(k);
	return pid;
}

void input_child_forked(pid_t pid, uint64_t forked_at)
{
	pthread_mutex_lock(&lock);
	if (nkids == MAX_CHILDREN) {
		/* A server with this many children at once is not one whose
		 * children we order; the oldest is left to itself. */
		pr_warn("more than %d children forked by requests: child %d is no longer ordered",
			MAX_CHILDREN, (int)kids[0].pid);
		forget(&kids[0]);
	}
	kids[nkids++] = (struct child){ .pid = pid, .forked_at = forked_at };
	__atomic_add_fetch(&untold, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock);
}

int input_child_exits(uint64_t *at, int max)
{
	int count = 0;

	if (!__atomic_load_n(&untold, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nkids && count < max; i++) {
		struct child *k = &kids[i];
		if (k->exit_told || (!k->ended && runs(k->pid)))
			continue;
		k->exit_told = 1;
		__atomic_sub_fetch(&untold, 1, __ATOMIC_RELAXED);
		at[count++] = k->forked_at;
	}
	pthread_mutex_unlock(&lock);
	return count;
}

/* wait4 that keeps the ends of logged children: returns another child's
 * end, or 0 when only logged ones ended (or none did) with WNOHANG; -1 as
 * wait4 does, but never ECHILD while logged ends are kept (the server
 * must go on believing they run). */
static pid_t reap_keeping(pid_t pid, int *status, int options, struct rusage *ru)
{
	for (;;) {
		int st;
		struct rusage r;
		pid_t got = sys.wait4(pid, &st, options | WNOHANG, &r);

		if (got > 0) {
			pthread_mutex_lock(&lock);
			struct child *k = by_pid(got);
			if (k && !k->released) {
				ended(k, st, &r);
				pthread_mutex_unlock(&lock);
				continue;
			}
			if (k)
				forget(k);
			pthread_mutex_unlock(&lock);
			if (status)
				*status = st;
			if (ru)
				*ru = r;
			return got;
		}
		if (got < 0 && errno != ECHILD)
			return got;
		pthread_mutex_lock(&lock);
		int kept = ended_of(pid) != NULL || (pid > 0 && by_pid(pid));
		pthread_mutex_unlock(&lock);
		if (got < 0 && !kept)
			return got;	/* ECHILD: truly none */
		if (options & WNOHANG)
			return 0;
		/* A blocking wait: the end it may return comes with the log. */
		return -2;
	}
}

/* Backup: the end the replay stands at, if PID's wait may have it. */
static pid_t take_due(pid_t pid, int *status, struct rusage *ru, uint64_t *idx, uint64_t *stamp)
{
	pid_t got = 0;

	pthread_mutex_lock(&lock);
	struct child *k = due_at && !due_taken ? by_fork(due_at) : NULL;
	if (k && (pid == -1 || pid == k->pid)) {
		if (!k->ended) {
			/* Its twin ended on the leader: this one ends soon. */
			pid_t kp = k->pid;
			int st;
			struct rusage r;
			pthread_mutex_unlock(&lock);
			pid_t w;
			while ((w = sys.wait4(kp, &st, 0, &r)) < 0 && errno == EINTR)
				;
			pthread_mutex_lock(&lock);
			k = by_pid(kp);
			if (!k || w != kp) {
				if (k)
					forget(k);
				pthread_mutex_unlock(&lock);
				return 0;
			}
			ended(k, st, &r);
		}
		*idx = due_idx;
		*stamp = due_stamp;
		got = hand_over(k, status, ru);
		__atomic_store_n(&due_taken, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
	return got;
}

/* Leader: logs the end of K (under lock, released here) before the
 * server learns it, and opens its entry's window. */
static pid_t announce(struct node *n, struct child *k, int *status, struct rusage *ru)
{
	uint64_t at = k->forked_at;
	pid_t pid = hand_over(k, status, ru);
	struct iovec iov = { &at, sizeof(at) };

	pthread_mutex_unlock(&lock);
	if (node_propose(n, ENTRY_CHILD, 0, (struct viewstamp){ 0, 0 }, &iov, 1, sizeof(at), NULL))
		pr_warn("the end of child %d (forked at entry %llu) could not be logged: "
			"its time on the backups may differ", (int)pid, (unsigned long long)at);
	else
		input_window_enter(node_proposed_stamp(), node_proposed_idx());
	return pid;
}

pid_t input_child_wait(struct node *n, pid_t pid, int *status, int options, struct rusage *ru)
{
	struct child *k;

	/* A poll (WNOHANG) is ordered wherever it is made: a server's timers
	 * run in the window of whatever it read last in the same pass. */
	if (pid < -1 || pid == 0 || (input_clock_ms && !(options & WNOHANG))) {
		/* A blocking wait inside a window (its entry is the end's
		 * position on every replica), or a process group: as it
		 * comes, but a kept end first. */
		pthread_mutex_lock(&lock);
		k = pid >= -1 && pid != 0 ? ended_of(pid) : NULL;
		if (k) {
			pid_t got = hand_over(k, status, ru);
			pthread_mutex_unlock(&lock);
			return got;
		}
		pthread_mutex_unlock(&lock);
		pid_t got = sys.wait4(pid, status, options, ru);
		if (got > 0) {
			pthread_mutex_lock(&lock);
			if ((k = by_pid(got)))
				forget(k);
			pthread_mutex_unlock(&lock);
		}
		return got;
	}
	for (;;) {
		if (node_serving(n)) {
			/* Leader: an end kept while this node was a backup, else
			 * the next one that comes. */
			pthread_mutex_lock(&lock);
			if ((k = ended_of(pid)))
				return announce(n, k, status, ru);
			pthread_mutex_unlock(&lock);
			int st;
			struct rusage r;
			pid_t got = sys.wait4(pid, &st, options, &r);
			if (got <= 0)
				return got;
			pthread_mutex_lock(&lock);
			k = by_pid(got);
			if (k) {
				ended(k, st, &r);
				return announce(n, k, status, ru);
			}
			pthread_mutex_unlock(&lock);
			if (status)
				*status = st;
			if (ru)
				*ru = r;
			return got;
		}
		uint64_t idx, stamp;
		pthread_mutex_lock(&lock);
		if ((k = released_of(pid))) {
			pid_t got = hand_over(k, status, ru);
			pthread_mutex_unlock(&lock);
			return got;
		}
		pthread_mutex_unlock(&lock);
		pid_t got = take_due(pid, status, ru, &idx, &stamp);
		if (got > 0) {
			input_window_enter(stamp, idx);
			return got;
		}
		got = reap_keeping(pid, status, options, ru);
		if (got != -2)
			return got;
		/* A blocking wait outside a window: look again soon. */
		struct timespec t = { 0, 1000000 };
		nanosleep(&t, NULL);
	}
}

/* A child of ours that is the twin of the leader's child FORKED_AT,
 * forked here in another window, or NULL.  A server's timers fork in the
 * window of whatever it read last (Redis's cron starts a rewrite asked
 * while another child ran), which differs between replicas.  For a server
 * that runs one child at a time (Redis), the only child we have when the
 * leader's ended is its twin: any child forked by a request here was
 * forked by that request on the leader too.  With more children at once
 * they cannot be told apart: none is taken. */
static struct child *timer_twin(uint64_t forked_at)
{
	if (nkids != 1 || kids[0].released)
		return NULL;
	pr_info("child %d, forked here at entry %llu, is the twin of the leader's child forked at "
		"entry %llu (forked from the server's timers)", (int)kids[0].pid,
		(unsigned long long)kids[0].forked_at, (unsigned long long)forked_at);
	kids[0].forked_at = forked_at;
	return &kids[0];
}

int input_child_exit_due(uint64_t forked_at, uint64_t idx, uint64_t waited_ns, int may_fork)
{
	static uint64_t said_at;	/* the entry whose wait was logged */
	int done = 1;

	pthread_mutex_lock(&lock);
	struct child *k = by_fork(forked_at);
	/* A twin our timers forked in another window is only looked at here:
	 * ENTRY_CHILD takes it for F (timer_twin), once, where its end is due.
	 * An ended child is no twin: its end waits for its own entry. */
	if (!k && may_fork && nkids == 1 && !kids[0].ended && !kids[0].released)
		k = &kids[0];
	if (!k)
		done = !may_fork || waited_ns >= CHILD_TWIN_WAIT_NS;
	else if (!k->ended && !k->released && runs(k->pid)) {
		done = waited_ns >= CHILD_RUN_MAX_NS;
		if (done)
			pr_warn("child %d (forked at entry %llu) still runs here %llu s after entry %llu: "
				"the replay goes on without its exit",
				(int)k->pid, (unsigned long long)forked_at,
				(unsigned long long)(waited_ns / 1000000000), (unsigned long long)idx);
		else if (said_at != idx)
			pr_debug("entry %llu: child %d (forked at entry %llu) exited on the leader and still "
				"runs here: the replay waits for its exit",
				(unsigned long long)idx, (int)k->pid, (unsigned long long)forked_at);
		said_at = idx;
	}
	pthread_mutex_unlock(&lock);
	return done;
}

int input_child_due(uint64_t forked_at, uint64_t idx, uint64_t stamp, uint64_t waited_ns,
		    int may_fork)
{
	int done;

	pthread_mutex_lock(&lock);
	if (due_at != forked_at || due_idx != idx) {
		if (!by_fork(forked_at) && !(may_fork && timer_twin(forked_at))) {
			/* Our timers may not have forked the twin yet (they run
			 * every 100 ms in Redis); a server whose state starts
			 * after FORKED_AT never will. */
			int wait = may_fork && waited_ns < CHILD_TWIN_WAIT_NS;
			pthread_mutex_unlock(&lock);
			return !wait;	/* no such child here */
		}
		due_at = forked_at;
		due_idx = idx;
		due_stamp = stamp;
		due_taken = 0;
		due_running_ns = 0;
	}
	done = due_taken;
	if (!done && waited_ns > CHILD_WAIT_NS) {
		struct child *k = by_fork(forked_at);
		uint64_t now = now_ns();

		/* Our twin of the leader's child may well run longer than it
		 * did (a slower disk, a busier machine): its end is the input,
		 * so wait for it, then give the server CHILD_WAIT_NS to ask. */
		if (k && !k->ended && waited_ns < CHILD_RUN_MAX_NS && runs(k->pid)) {
			if (!due_running_ns)
				pr_info("entry %llu: child %d (forked at entry %llu) still runs here: "
					"the replay waits for its end",
					(unsigned long long)idx, (int)k->pid,
					(unsigned long long)forked_at);
			due_running_ns = now;
			pthread_mutex_unlock(&lock);
			return 0;
		}
		if (due_running_ns && now - due_running_ns < CHILD_WAIT_NS) {
			pthread_mutex_unlock(&lock);
			return 0;
		}
		pr_warn("the server did not wait for child %d (forked at entry %llu) within %llu ms "
			"of entry %llu: it learns of its end when it asks",
			k ? (int)k->pid : -1, (unsigned long long)forked_at,
			(unsigned long long)(CHILD_WAIT_NS / 1000000), (unsigned long long)idx);
		if (k)
			k->released = 1;
		done = 1;
	}
	if (done)
		due_at = due_idx = 0;
	pthread_mutex_unlock(&lock);
	return done;
}
