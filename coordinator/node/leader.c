/* The leader: propose path (design §3 L2-L4), commit, heartbeats, syncing
 * backups that join (log repair: they get our log from where their server
 * stands), the takeover of a newly elected leader (a NOOP of its view, its
 * own server brought up to date, then clients), and stepping down when a
 * newer view shows up. */
#define LOG_PREFIX "leader: "
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic64.h"
#include "common/futex.h"
#include "coordinator/node/hook.h"
#include "coordinator/node/input_child.h"
#include "coordinator/input/input_clock.h"
#include "common/logger.h"
#include "coordinator/node/members.h"
#include "coordinator/node/metrics.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/node/replay.h"

/* How long a new leader's server may make no progress before the leader
 * steps down (leader_can_catch_up): shorter than replay's own bound for a
 * turn left untaken (replay.c skips it after 10 s, and replay order is
 * then no longer guaranteed), so another node takes over first.  A
 * server loading its snapshot is not counted (node_execute waits). */
#define CATCH_UP_STALL_NS (5ULL * 1000000000ULL)

static int peer_synced(struct node *n, int peer)
{
	return __atomic_load_n(&n->connected, __ATOMIC_ACQUIRE) & (1u << peer);
}

static int deposed(struct node *n)
{
	return node_role(n) != ROLE_LEADER;
}

/* Log before this position may be overwritten: every synced backup
 * applied it, and so did our own server while it catches up after a
 * takeover.  A backup that is down or not yet synced holds nothing: the
 * log is bounded, and one that comes back after its entries were
 * overwritten is told so and rebuilt from a peer (apus rebuild).  Its
 * last position is still kept while there is room, so a quick restart
 * catches up from the log.
 * With snapshots, only log that recovery points cover is reclaimed: a
 * majority's (Raft's compaction rule: any surviving majority can rebuild
 * the state), and ours and every synced backup's too, so that any of us
 * that crashes comes back from its own snapshot and log. */
static uint64_t leader_reclaim_pos(struct node *n, uint64_t end)
{
	uint64_t tail = __atomic_load_n(&n->lead.tail, __ATOMIC_ACQUIRE);
	uint64_t synced = tail, all = tail, covered = tail;
	int snapshots = n->cfg.snapshot_cmd[0] != '\0';

	/* A leader that takes no snapshots (snapshot_leader = off) is
	 * rebuilt from a peer if it crashes: its peers' points suffice. */
	if (snapshots && n->cfg.snapshot_leader)
		covered = __atomic_load_n(&n->snap.pos, __ATOMIC_ACQUIRE);
	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && node_is_member(n, k)) {
			uint64_t a = load64(&n->ctl->peer[k].applied_end);
			if (peer_synced(n, k) && a < synced)
				synced = a;
			if (a < all)
				all = a;
			uint64_t c = load64(&n->ctl->peer[k].snap_pos);
			if (snapshots && peer_synced(n, k) && c < covered)
				covered = c;
		}
	if (!__atomic_load_n(&n->serving, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&n->exec.pos, __ATOMIC_RELAXED) < synced)
		synced = __atomic_load_n(&n->exec.pos, __ATOMIC_RELAXED);
	if (all > synced)
		all = synced;
	uint64_t pos = end - all <= n->log_size ? all : synced;
	uint64_t floor = node_snapshot_floor(n);
	if (covered < floor)
		floor = covered;
	return floor < pos ? floor : pos;
}

/* Rings the synced peers after writes to them.  Where writes land by
 * themselves, only those whose acks make the quorum are rung per entry
 * (unless too few of them are synced): the others, asleep between
 * batches, would cost a futex wake-up each time, on the server's thread.
 * They wake on their own every quarter heartbeat, at every heartbeat, and
 * when a wait for commit or for room outlasts its spin (ALL). */
static void leader_ring(struct node *n, int all)
{
	if (!all && n->ops->writes_land) {
		int fast = 0;

		for (int k = 0; k < n->cfg.nnodes; k++)
			if (k != n->self && peer_synced(n, k) && node_votes(n, k) &&
			    node_acks_fast(n, n->self, k))
				fast++;
		all = fast < __atomic_load_n(&n->quorum, __ATOMIC_RELAXED) - 1;
	}
	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && peer_synced(n, k) && (all || node_acks_fast(n, n->self, k)))
			n->ops->ring(n->tp, k);
}

static void ring_all(struct node *n)
{
	leader_ring(n, 1);
}

/* Tells every synced peer the commit index; backups keep the largest they saw. */
static void leader_publish_commit(struct node *n, uint64_t commit)
{
	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && peer_synced(n, k))
			n->ops->write(n->tp, k, offsetof(struct region_ctl, lead[n->self].commit),
				      &commit, 8);
	leader_ring(n, 0);
}

static void leader_set_commit(struct node *n, uint64_t idx)
{
	uint64_t cur = __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE);

	while (cur < idx)
		if (__atomic_compare_exchange_n(&n->commit, &cur, idx, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			leader_publish_commit(n, idx);
			return;
		}
}

/* Commit from the synced voters' cumulative acks: the quorum-th largest
 * acked index (this node counts with what it has persisted).  Entries of
 * earlier views commit only with the first entry of ours (Raft's rule):
 * until a majority holds it, another candidate could still win.  Learners'
 * acks count for nothing (members.h). */
static void leader_commit_from_peers(struct node *n)
{
	uint64_t acked[APUS_MAX_NODES];
	int cnt = 0, quorum = __atomic_load_n(&n->quorum, __ATOMIC_ACQUIRE);

	for (int k = 0; k < n->cfg.nnodes; k++)
		if (node_votes(n, k))
			acked[cnt++] = k == n->self ? __atomic_load_n(&n->lead.self_acked,
								      __ATOMIC_ACQUIRE)
				       : peer_synced(n, k) ? load64(&n->ctl->peer[k].acked) : 0;
	if (cnt < quorum)
		return;
	/* Insertion sort, descending: at most 8 values. */
	for (int i = 1; i < cnt; i++)
		for (int j = i; j > 0 && acked[j] > acked[j - 1]; j--) {
			uint64_t t = acked[j];
			acked[j] = acked[j - 1];
			acked[j - 1] = t;
		}
	if (acked[quorum - 1] >= n->lead.view_start)
		leader_set_commit(n, acked[quorum - 1]);
}

/* Commit and a heartbeat into PEER's lead slot for us: the heartbeat
 * counter and the view as one write, view last. */
static void leader_heartbeat(struct node *n, int peer, uint64_t hb)
{
	uint64_t commit = __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE);
	uint64_t words[2] = { hb, n->view };

	if (peer_synced(n, peer))
		n->ops->write(n->tp, peer, offsetof(struct region_ctl, lead[n->self].commit), &commit,
			      8);
	n->ops->write(n->tp, peer, offsetof(struct region_ctl, lead[n->self].hb), words,
		      sizeof(words));
	/* A backup waits on its doorbell at most a quarter of a heartbeat
	 * period (backup_run's check): where writes land without a ring, it
	 * is woken only for news, a commit or a view, not for every heartbeat
	 * of an idle cluster (a futex wake on us and a wake-up on it, a peer,
	 * a period).  Elsewhere (tcp) the ring is what sends the writes. */
	if (n->ops->writes_land && commit == n->lead.hb_rung_commit[peer] &&
	    n->view == n->lead.hb_rung_view[peer])
		return;
	n->lead.hb_rung_commit[peer] = commit;
	n->lead.hb_rung_view[peer] = n->view;
	n->ops->ring(n->tp, peer);
}

/* Sends log bytes [pos, pos+len) (from the replicated part of an entry
 * on) to every synced backup. */
static void leader_replicate(struct node *n, uint64_t pos, size_t len)
{
	uint64_t off = node_log_off(n, pos) + ENTRY_REPLICATED_OFF;
	const char *src = n->log + pos % n->log_size + ENTRY_REPLICATED_OFF;

	for (int k = 0; k < n->cfg.nnodes; k++) {
		if (k == n->self || !peer_synced(n, k))
			continue;
		int rc = n->ops->write(n->tp, k, off, src, len - ENTRY_REPLICATED_OFF);
		if (rc)
			pr_warn("write to node %d failed: %s", k, strerror(-rc));
	}
}

/* Copies log positions [from, to) to PEER, in up to two pieces (the log is
 * circular).  Called with n->lead.lock held. */
static void leader_copy(struct node *n, int peer, uint64_t from, uint64_t to)
{
	while (from < to) {
		uint64_t off = from % n->log_size;
		uint64_t len = to - from < n->log_size - off ? to - from : n->log_size - off;

		n->ops->write(n->tp, peer, REGION_CTL_SIZE + off, n->log + off, len);
		from += len;
	}
}

/* The end of a joining backup's own log (PS) when our log holds that very
 * entry, else 0.  Its log is then ours up to there: an entry of a view is
 * written at one index and position once, and logs only ever take a
 * leader's entries in order.  Called with n->lead.lock held. */
static uint64_t leader_holds(struct node *n, const struct peer_slot *ps)
{
	uint64_t idx = __atomic_load_n(&ps->join_end_idx, __ATOMIC_RELAXED);
	uint64_t at = __atomic_load_n(&ps->join_end_at, __ATOMIC_RELAXED), p = at;
	const struct entry_hdr *e;

	/* Only inside our log: past its end our region may hold entries a
	 * repair cut off. */
	if (!idx || idx > n->lead.last_idx || at >= n->lead.tail || n->lead.tail - at > n->log_size)
		return 0;
	e = node_entry_at(n, &p, idx);
	return e && p == at && e->view == __atomic_load_n(&ps->join_end_view, __ATOMIC_RELAXED)
		       ? idx : 0;
}

/* Log repair: a backup that joined our view gets our log from where its
 * server stands (its own entries beyond may differ: they are overwritten,
 * and the sync words tell it that only entries of our view may follow). */
static void leader_sync_peers(struct node *n)
{
	for (int k = 0; k < n->cfg.nnodes; k++) {
		struct peer_slot *ps = &n->ctl->peer[k];

		if (k == n->self || !node_is_member(n, k) || load64(&ps->join_view) != n->view)
			continue;
		uint64_t inc = __atomic_load_n(&ps->join_inc, __ATOMIC_RELAXED);
		uint64_t seq = __atomic_load_n(&ps->join_seq, __ATOMIC_RELAXED);
		if (n->lead.peer_inc[k] == inc && n->lead.peer_seq[k] == seq)
			continue;	/* answered (a synced peer that lost entries joins anew) */
		if (!n->ops->connected(n->tp, k) && n->ops->connect(n->tp, k))
			continue;
		uint64_t applied = __atomic_load_n(&ps->join_applied, __ATOMIC_RELAXED);
		uint64_t from = __atomic_load_n(&ps->join_applied_end, __ATOMIC_RELAXED);

		pthread_mutex_lock(&n->lead.lock);
		if (from > n->lead.tail || n->lead.tail - from > n->log_size) {
			uint64_t same = leader_holds(n, ps);
			pthread_mutex_unlock(&n->lead.lock);
			if (same > applied)
				pr_info("node %d needs entries from %llu on, which this log no longer "
					"holds, but its own log is ours up to %llu: it executes that first",
					k, (unsigned long long)applied + 1, (unsigned long long)same);
			else
				pr_err("node %d needs entries from %llu on, which this log no longer "
				       "holds: it must be rebuilt from a peer (apus rebuild --node %d)",
				       k, (unsigned long long)applied + 1, k);
			n->lead.peer_inc[k] = inc;
			n->lead.peer_seq[k] = seq;
			struct sync_words s = { SYNC_BEHIND, same,
						__atomic_load_n(&n->commit, __ATOMIC_ACQUIRE), inc, seq,
						n->view };
			n->ops->write(n->tp, k, offsetof(struct region_ctl, sync), &s, sizeof(s));
			n->ops->ring(n->tp, k);
			continue;
		}
		store64(&ps->acked, applied);
		store64(&ps->applied, applied);
		store64(&ps->applied_end, from);
		uint64_t upto = n->lead.last_idx, tail = n->lead.tail;
		leader_copy(n, k, from, tail);
		struct sync_words s = { from, applied + 1, upto, inc, seq, n->view };
		n->ops->write(n->tp, k, offsetof(struct region_ctl, sync), &s, sizeof(s));
		n->lead.peer_inc[k] = inc;
		n->lead.peer_seq[k] = seq;
		__atomic_or_fetch(&n->connected, 1u << k, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&n->lead.lock);
		n->ops->ring(n->tp, k);
		pr_info("node %d joined: copied it entries %llu..%llu (%llu bytes)", k,
			(unsigned long long)applied + 1, (unsigned long long)upto,
			(unsigned long long)(tail - from));
	}
}

/* Notices synced peers that restarted, died or lost their connection:
 * such a one receives nothing until it joins again (what we sent meanwhile
 * is lost to it), and holds no log (a dead peer must never stall us); any
 * gets heartbeats again once reached anew. */
static void leader_check_peers(struct node *n)
{
	for (int k = 0; k < n->cfg.nnodes; k++) {
		if (k == n->self)
			continue;
		/* check() also follows a peer that restarted to its new
		 * region (shm), synced or not: ask every connected one. */
		int lost = !n->ops->connected(n->tp, k);
		if ((!lost && n->ops->check(n->tp, k) == 0) || !peer_synced(n, k))
			continue;
		__atomic_and_fetch(&n->connected, ~(1u << k), __ATOMIC_RELEASE);
		n->lead.peer_inc[k] = 0;
		store64(&n->ctl->peer[k].acked, 0);
		pr_warn("node %d %s: it receives nothing until it joins again", k,
			lost ? "is no longer connected" : "restarted or died");
	}
}

/* Sleeps on our doorbell until COND(n, arg) holds; spins first.  IDLE, if
 * given, runs before each sleep.  Returns 0, or -EPERM once deposed. */
static int leader_wait(struct node *n, int (*cond)(struct node *, uint64_t), uint64_t arg,
		       void (*idle)(struct node *))
{
	uint64_t start = now_ns();
	unsigned spins = 0;

	while (!cond(n, arg)) {
		if (deposed(n))
			return -EPERM;
		if (++spins < 64 || now_ns() - start < n->spin_ns) {
			cpu_relax();
			continue;
		}
		if (idle)
			idle(n);
		uint32_t seen = n->ops->bell(n->tp);
		if (cond(n, arg))
			return 0;
		n->ops->wait(n->tp, seen, n->cfg.heartbeat_ms * 1000);
	}
	return 0;
}

static int space_free(struct node *n, uint64_t end)
{
	return end - leader_reclaim_pos(n, end) <= n->log_size || deposed(n);
}

/* While the log is full: backups apply only what is committed, so keep
 * commit moving, and wake every backup (what they applied frees it). */
static void space_idle(struct node *n)
{
	leader_commit_from_peers(n);
	ring_all(n);
}

/* The log new requests leave free for the rest of those already read in
 * part (node_input_room). */
static uint64_t rest_reserve(const struct node *n)
{
	return n->log_size / 8;
}

int node_input_room(struct node *n, int wait_us, int rest)
{
	uint64_t deadline = now_ns() + (uint64_t)wait_us * 1000ULL;

	for (;;) {
		/* Headroom for the small records that cannot wait (an ACCEPT,
		 * a CLOSE, the checker's hashes) stays free for them. */
		uint64_t end = __atomic_load_n(&n->lead.tail, __ATOMIC_ACQUIRE) +
			       4ULL * n->cfg.max_entry + (rest ? 0 : rest_reserve(n));
		if (space_free(n, end))
			return 1;
		uint64_t now = now_ns();
		if (now >= deadline)
			return 0;
		space_idle(n);
		uint32_t seen = n->ops->bell(n->tp);
		if (space_free(n, end))
			return 1;
		n->ops->wait(n->tp, seen, (int)((deadline - now) / 1000) + 1);
	}
}

/* Before appending an event of LEN bytes (called with n->lead.lock held):
 * waits, without the lock, until the log has room for all of its entries
 * (and the gap a wrap may leave), so that they stay contiguous in the log
 * and the role thread, which takes the lock to sync a joining backup (that
 * may be what frees the log), never waits behind a full log.  An event
 * bigger than half the log waits entry by entry, holding the lock. */
static void leader_reserve(struct node *n, size_t len)
{
	/* Its entries, split as leader_submit does, plus the gap a wrap may leave. */
	uint64_t need = entry_size(len < n->cfg.max_entry ? (uint32_t)len : n->cfg.max_entry);
	size_t done = 0;

	do {
		uint32_t chunk = len - done > n->cfg.max_entry ? n->cfg.max_entry
							       : (uint32_t)(len - done);
		need += entry_size(chunk);
		done += chunk;
	} while (done < len);
	if (need > n->log_size / 2)
		return;
	while (!space_free(n, n->lead.tail + need)) {
		uint64_t end = n->lead.tail + need;

		pthread_mutex_unlock(&n->lead.lock);
		leader_wait(n, space_free, end, space_idle);
		pthread_mutex_lock(&n->lead.lock);
	}
}

/* Appends one entry (LEN data bytes of IOV from SKIP on).  Called with
 * n->lead.lock held.  Returns the entry's position. */
static uint64_t leader_append(struct node *n, struct entry_meta *m, const struct iovec *iov,
			      int iovcnt, size_t skip, uint32_t len)
{
	size_t need = entry_size(len);
	int wrap;
	uint64_t pos = log_pos_place(n->log_size, n->lead.tail, need, &wrap);

	leader_wait(n, space_free, pos + need, space_idle);
	m->idx = n->lead.last_idx + 1;
	m->committed = __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE);
	if (wrap && log_pos_marker_fits(n->log_size, n->lead.tail)) {
		struct entry_meta w = *m;

		w.type = ENTRY_WRAP;
		w.conn = (struct viewstamp){ 0, 0 };
		size_t l = entry_write(n->log + n->lead.tail % n->log_size, &w, NULL, 0, 0, 0);
		node_persist(n, n->lead.tail, l);
		leader_replicate(n, n->lead.tail, l);
	}
	/* Acks of whatever entry sat here before (a truncated one of another
	 * view may even have had this index) must not count for this one. */
	memset(((struct entry_hdr *)(n->log + pos % n->log_size))->reply, 0,
	       sizeof(((struct entry_hdr *)0)->reply));
	size_t l = entry_write(n->log + pos % n->log_size, m, iov, iovcnt, skip, len);
	node_persist(n, pos, l);
	leader_replicate(n, pos, l);
	__atomic_store_n(&n->lead.last_idx, m->idx, __ATOMIC_RELEASE);
	__atomic_store_n(&n->lead.tail, pos + need, __ATOMIC_RELEASE);
	node_set_hint(n, m->idx, pos, m->view);
	return pos;
}

struct entry_wait {
	uint64_t idx;
	const struct entry_hdr *e;
};

static int entry_committed(struct node *n, uint64_t arg)
{
	const struct entry_wait *w = (const void *)(uintptr_t)arg;
	int votes = node_votes(n, n->self);

	if (__atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) >= w->idx)
		return 1;
	/* Backup k writes our index into reply[k] once it holds the entry;
	 * a backup acks in log order, so it also holds every earlier one. */
	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && peer_synced(n, k) && node_votes(n, k) &&
		    __atomic_load_n(&w->e->reply[k], __ATOMIC_ACQUIRE) == w->idx)
			votes++;
	if (votes >= __atomic_load_n(&n->quorum, __ATOMIC_ACQUIRE) &&
	    w->idx >= n->lead.view_start) {
		leader_set_commit(n, w->idx);
		return 1;
	}
	return 0;
}

/* The stamp and the (last) index of the event the calling thread proposed
 * last (input_clock.h, input_random.h). */
static __thread uint64_t proposed_stamp, proposed_idx;

uint64_t node_proposed_stamp(void)
{
	return proposed_stamp;
}

uint64_t node_proposed_idx(void)
{
	return proposed_idx;
}

/* The input clock for a new entry (under n->lead.lock): never below a stamp
 * made or executed before, and never 0 in its low 32 bits (0: unknown). */
static uint32_t next_stamp(struct node *n)
{
	uint64_t now = realtime_ms(), last = __atomic_load_n(&n->stamp_ms, __ATOMIC_RELAXED);
	uint64_t s = now > last ? now : last;

	if (!(uint32_t)s)
		s++;
	__atomic_store_n(&n->stamp_ms, s, __ATOMIC_RELAXED);
	proposed_stamp = s;
	return (uint32_t)s;
}

/* Appends an event (split into entries of at most max_entry bytes) and
 * sends it to the backups; does not wait.  Returns the last entry's index
 * and sets *LAST_POS to its position. */
static uint64_t leader_submit(struct node *n, int type, int flags, struct viewstamp conn,
			      const struct iovec *iov, int iovcnt, size_t len, struct viewstamp *vs,
			      uint64_t *last_pos, int ring)
{
	struct entry_meta m = { .view = n->view, .conn = conn, .type = (uint16_t)type,
				.node = (uint8_t)n->self, .flags = (uint8_t)flags };
	size_t done = 0;

	pthread_mutex_lock(&n->lead.lock);
	m.stamp_ms = next_stamp(n);
	leader_reserve(n, len);
	do {
		uint32_t chunk = len - done > n->cfg.max_entry ? n->cfg.max_entry
							       : (uint32_t)(len - done);
		if (type == ENTRY_ACCEPT)
			m.conn = (struct viewstamp){ n->view, n->lead.last_idx + 1 };
		*last_pos = leader_append(n, &m, iov, iovcnt, done, chunk);
		if (!done && vs)
			*vs = (struct viewstamp){ m.view, m.idx };
		m.flags = 0;	/* the read's first entry carries them */
		done += chunk;
	} while (done < len);
	pthread_mutex_unlock(&n->lead.lock);
	proposed_idx = m.idx;
	status_add(&n->status->proposals, 1);

	if (ring)
		leader_ring(n, 0);
	uint64_t cur = __atomic_load_n(&n->lead.self_acked, __ATOMIC_ACQUIRE);
	while (cur < m.idx &&
	       !__atomic_compare_exchange_n(&n->lead.self_acked, &cur, m.idx, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	return m.idx;
}

/* Waits for W's commit; a commit counts in the latency histogram from T0. */
static int commit_wait_timed(struct node *n, struct entry_wait *w, uint64_t t0)
{
	int rc = leader_wait(n, entry_committed, (uint64_t)(uintptr_t)w, ring_all);

	if (!rc)
		metrics_commit_latency(n->status, now_ns() - t0);
	return rc;
}

/* Before an input of the server: the exits of its logged children since
 * its last input, each an ENTRY_CHILD_EXIT (input_child.h). */
static void log_child_exits(struct node *n)
{
	uint64_t at[8], pos;
	int count = input_child_exits(at, 8);

	for (int i = 0; i < count; i++) {
		struct iovec iov = { &at[i], sizeof(at[i]) };
		leader_submit(n, ENTRY_CHILD_EXIT, 0, (struct viewstamp){ 0, 0 }, &iov, 1,
			      sizeof(at[i]), NULL, &pos, 0);
	}
}

void node_input_handed(struct node *n, uint64_t idx)
{
	uint64_t cur;

	/* Only a held reply asks (node_wait_output): with commit_wait = read
	 * the server never sees uncommitted input, and read-ahead's fast path
	 * keeps no shared word. */
	if (n->cfg.commit_wait != COMMIT_WAIT_REPLY)
		return;
	cur = __atomic_load_n(&n->lead.handed_idx, __ATOMIC_RELAXED);
	while (cur < idx && !__atomic_compare_exchange_n(&n->lead.handed_idx, &cur, idx, 0,
							 __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

int node_propose(struct node *n, int type, int flags, struct viewstamp conn,
		 const struct iovec *iov, int iovcnt, size_t len, struct viewstamp *vs)
{
	uint64_t last_pos, last_idx, t0;

	if (!node_serving(n))
		return -EPERM;
	t0 = now_ns();
	if (type != ENTRY_CHILD)
		log_child_exits(n);
	last_idx = leader_submit(n, type, flags, conn, iov, iovcnt, len, vs, &last_pos, 1);
	if (n->cfg.commit_wait == COMMIT_WAIT_REPLY) {
		node_input_handed(n, last_idx);
		return 0;	/* node_wait_output() waits before the reply leaves */
	}

	struct entry_wait w = { last_idx,
				(const struct entry_hdr *)(n->log + last_pos % n->log_size) };
	return commit_wait_timed(n, &w, t0);
}

int node_propose_batch(struct node *n, struct proposal *p, int count)
{
	uint64_t last_pos = 0, last_idx = 0, t0;

	if (!node_serving(n))
		return -EPERM;
	t0 = now_ns();
	if (count)
		log_child_exits(n);
	for (int i = 0; i < count; i++) {
		last_idx = leader_submit(n, p[i].type, p[i].flags, p[i].conn, p[i].iov, p[i].iovcnt, p[i].len,
					 NULL, &last_pos, i == count - 1);
		p[i].stamp_ms = proposed_stamp;
		p[i].idx = proposed_idx;
	}
	if (!count || n->cfg.commit_wait == COMMIT_WAIT_REPLY)
		return 0;
	/* Backups ack in log order: the last entry's commit commits all. */
	struct entry_wait w = { last_idx,
				(const struct entry_hdr *)(n->log + last_pos % n->log_size) };
	return commit_wait_timed(n, &w, t0);
}

int leader_propose_members(struct node *n, const char *text, size_t len, uint64_t *idx)
{
	struct iovec iov = { (void *)text, len };
	uint64_t last_pos;

	if (!node_serving(n))
		return -EPERM;
	/* Room for it (and a wrap marker) now: the role thread never waits. */
	if (!space_free(n, __atomic_load_n(&n->lead.tail, __ATOMIC_ACQUIRE) + 2 * entry_size(len)))
		return -EAGAIN;
	*idx = leader_submit(n, ENTRY_MEMBERS, 0, (struct viewstamp){ 0, 0 }, &iov, 1, len, NULL,
			     &last_pos, 1);
	return 0;
}

int node_record(struct node *n, int type, const void *data, size_t len)
{
	struct iovec iov = { (void *)data, len };
	uint64_t last_pos;

	if (!node_serving(n))
		return -EPERM;
	/* Output marks never wait for room (the server's thread would
	 * wait, and it may be what makes room: node_input_room): a record
	 * the log has no room for is left out, the comparison skips it. */
	if (!node_input_room(n, 0, 1)) {
		static int told;
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
			pr_warn("the log is short of room: output marks are left out meanwhile");
		return -EAGAIN;
	}
	leader_submit(n, type, 0, (struct viewstamp){ 0, 0 }, &iov, 1, len, NULL, &last_pos, 1);
	return 0;
}

static int all_committed(struct node *n, uint64_t idx)
{
	if (__atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) >= idx)
		return 1;
	leader_commit_from_peers(n);
	return __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) >= idx;
}

int node_wait_output(struct node *n)
{
	uint64_t idx = __atomic_load_n(&n->lead.handed_idx, __ATOMIC_ACQUIRE);

	if (deposed(n))
		return -EPERM;
	if (__atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) >= idx)
		return 0;
	uint64_t t0 = now_ns();
	int rc = leader_wait(n, all_committed, idx, ring_all);
	if (!rc)
		metrics_commit_latency(n->status, now_ns() - t0);
	return rc;
}

/* A newly elected leader: forget what backups reported to an earlier
 * leader of ours, take the log as it lies, and open the view with a NOOP
 * (its commit commits everything before it). */
static void leader_takeover(struct node *n)
{
	uint64_t lv, li, end;

	for (int k = 0; k < n->cfg.nnodes; k++) {
		memset(&n->ctl->peer[k], 0, sizeof(n->ctl->peer[k]));
		n->lead.peer_inc[k] = 0;
		/* Our voters' recovery points: the log a majority's snapshots
		 * cover is known before anyone joins (our NOOP may need room). */
		if (k != n->self && load64(&n->ctl->vote[k].granted) == n->view)
			store64(&n->ctl->peer[k].snap_pos, load64(&n->ctl->vote[k].snap_pos));
	}
	__atomic_store_n(&n->connected, 0, __ATOMIC_RELEASE);
	node_log_end(n, &lv, &li, &end);
	pthread_mutex_lock(&n->lead.lock);
	n->lead.last_idx = li;
	n->lead.tail = end;
	n->lead.view_start = li + 1;
	pthread_mutex_unlock(&n->lead.lock);
	__atomic_store_n(&n->lead.self_acked, li, __ATOMIC_RELEASE);
	n->exec.catch_up_ns = 0;
	if (__atomic_load_n(&n->commit, __ATOMIC_RELAXED) < n->exec.idx - 1)
		__atomic_store_n(&n->commit, n->exec.idx - 1, __ATOMIC_RELEASE);
	pr_info("leading view %llu: log ends at entry %llu of view %llu; executing it before serving",
		(unsigned long long)n->view, (unsigned long long)li, (unsigned long long)lv);
}

/* Opens our view with its NOOP once the log has room for it.  The role
 * thread never waits for room: the peers whose snapshots make room learn
 * of us only through its heartbeats and report when they join.  Returns
 * 1 once the NOOP is in the log. */
static int leader_open_view(struct node *n)
{
	uint64_t last_pos;

	if (n->lead.last_idx >= n->lead.view_start)
		return 1;
	/* A NOOP, and the wrap marker it may need. */
	if (!space_free(n, n->lead.tail + 2 * entry_size(0)))
		return 0;
	leader_submit(n, ENTRY_NOOP, 0, (struct viewstamp){ 0, 0 }, NULL, 0, 0, NULL, &last_pos, 1);
	return 1;
}

/* A leader of a newer view exists, or a candidate for one: we lost ours.
 * Every proposal still waiting fails (its client gets no answer). */
static int leader_check_deposed(struct node *n)
{
	for (int k = 0; k < n->cfg.nnodes; k++) {
		uint64_t v = load64(&n->ctl->lead[k].view);

		if (k == n->self || !load64(&n->ctl->lead[k].hb) || v <= n->view)
			continue;
		pr_warn("node %d leads view %llu: stepping down from view %llu", k,
			(unsigned long long)v, (unsigned long long)n->view);
		n->ctl->dur.view = v;
		node_save_durable(n);
		__atomic_store_n(&n->serving, 0, __ATOMIC_RELEASE);
		node_set_role(n, ROLE_DEPOSED, k, v);
		return 1;
	}
	/* A candidate past its pre-vote: a majority no longer hears us. */
	int k = election_newer_request(n, n->view);
	if (k >= 0) {
		pr_warn("node %d stands for a newer view: stepping down from view %llu", k,
			(unsigned long long)n->view);
		__atomic_store_n(&n->serving, 0, __ATOMIC_RELEASE);
		node_set_role(n, ROLE_DEPOSED, -1, n->view);
		return 1;
	}
	return 0;
}

/* A new leader whose server cannot reach the end of its log would hold
 * the cluster for ever: its peers follow it and nobody serves.  It steps
 * down instead, as a backup, so that the others elect one that can, and
 * says why.  UNABLE: it never can (snap.recoverable = 0: it does not stand
 * again); else it lets the others stand first. */
static void leader_step_down(struct node *n, const char *why, int unable)
{
	pr_err("stepping down from view %llu: %s", (unsigned long long)n->view, why);
	snprintf(n->status->stepdown_reason, sizeof(n->status->stepdown_reason),
		 "view %llu: %s", (unsigned long long)n->view, why);
	status_add(&n->status->stepdowns, 1);
	if (unable) {
		__atomic_store_n(&n->snap.recoverable, 0, __ATOMIC_RELEASE);
		n->status->recoverable = 0;
	} else {
		n->exec.no_stand_until_ns = now_ns() + CATCH_UP_STALL_NS;
	}
	__atomic_store_n(&n->serving, 0, __ATOMIC_RELEASE);
	node_set_role(n, ROLE_BACKUP, -1, n->view);
}

/* Whether our server can execute the rest of our log: its next entry is
 * still in the log (a server restored to an old state, whose log was
 * reclaimed past it since, cannot), and it made progress (an entry
 * executed, a turn taken) within CATCH_UP_STALL_NS while work waited for
 * it.  Steps down if not. */
static int leader_can_catch_up(struct node *n, int turns_left)
{
	char why[160];
	uint64_t pos = n->exec.pos, now = now_ns();
	uint64_t mark = n->exec.idx + replay_turns_taken(n->exec.replay);

	if (n->exec.idx <= n->lead.last_idx && !node_entry_at(n, &pos, n->exec.idx)) {
		snprintf(why, sizeof(why), "its log no longer holds entry %llu, the next its server "
			 "must execute (its state is at entry %llu)",
			 (unsigned long long)n->exec.idx, (unsigned long long)n->exec.idx - 1);
		leader_step_down(n, why, 1);
		return 0;
	}
	/* Progress, nothing for the server to do, or a server still loading
	 * its state (node_execute waits for it; a snapshot_load_cmd that
	 * failed once is no longer given the benefit): not stuck. */
	if (mark != n->exec.catch_up_mark || !n->exec.catch_up_ns ||
	    (!turns_left && n->exec.idx > __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE)) ||
	    !__atomic_load_n(&n->status->app_ready, __ATOMIC_ACQUIRE) ||
	    node_snapshot_loading(n)) {
		n->exec.catch_up_mark = mark;
		n->exec.catch_up_ns = now;
		return 1;
	}
	if (now - n->exec.catch_up_ns <= CATCH_UP_STALL_NS)
		return 1;
	snprintf(why, sizeof(why), "its server made no progress for %llu s (at entry %llu)",
		 (unsigned long long)(CATCH_UP_STALL_NS / 1000000000ULL),
		 (unsigned long long)n->exec.idx);
	leader_step_down(n, why, 0);
	return 0;
}

/* Takeover: our own server executes the log up to our NOOP; once it has
 * taken every turn, clients are welcome. */
static void leader_catch_up(struct node *n)
{
	if (!leader_open_view(n))
		return;
	node_execute(n, __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE), 0);
	/* Maintained on every pass, not only once all is executed: an entry
	 * may wait for the server's turns (an ACCEPT for the CLOSE turns
	 * before it), and only maintenance skips a turn the server dropped. */
	int turns_left = replay_maintain(n->exec.replay);
	if (!leader_can_catch_up(n, turns_left))
		return;
	if (n->exec.idx <= n->lead.view_start || turns_left)
		return;
	__atomic_store_n(&n->serving, 1, __ATOMIC_RELEASE);
	pr_info("serving clients as leader of view %llu (executed %llu entries)",
		(unsigned long long)n->view, (unsigned long long)n->exec.idx - 1);
	hook_leader_change(n);
}

/* The leader's role loop: connects peers, syncs those that join, sends
 * heartbeats (commit, a counter, the view), keeps commit moving and the
 * status block fresh; after a takeover, first brings its server up to date. */
void leader_run(struct node *n, int takeover)
{
	uint64_t hb = 0;
	struct timespec period = { n->cfg.heartbeat_ms / 1000,
				   (long)(n->cfg.heartbeat_ms % 1000) * 1000000 };

	/* A takeover runs the hook once its server is current (catch-up).  A
	 * new cluster's node 0 leads view 0 without an election: it runs the
	 * hook once a majority has joined that view, never before (a node 0
	 * restarted with an empty log leads view 0 again until the others,
	 * long past it, depose it: it must not take the virtual IP). */
	int hook_due = !takeover;

	if (takeover)
		leader_takeover(n);
	/* A change this node proposed while it led before is in its log, or
	 * not: it comes into force when executed, like anyone's. */
	free(n->lead.member_pending_text);
	n->lead.member_pending_text = NULL;
	n->lead.member_pending = 0;
	store64(&n->status->member_pending, 0);
	n->status->ready = 0;
	while (!__atomic_load_n(&n->stopping, __ATOMIC_RELAXED) && !deposed(n)) {
		/* Acks may arrive while no proposer waits (commit_wait = reply). */
		n->ops->poll(n->tp);
		node_checkpoint_poll(n);	/* refuses: the leader is never paused */
		leader_check_peers(n);
		if (leader_check_deposed(n))
			break;
		leader_sync_peers(n);
		leader_commit_from_peers(n);
		hb++;
		for (int k = 0; k < n->cfg.nnodes; k++)
			if (k != n->self && node_is_member(n, k) &&
			    (n->ops->connected(n->tp, k) || !n->ops->connect(n->tp, k)))
				leader_heartbeat(n, k, hb);
		members_poll(n);
		if (deposed(n))
			break;	/* removed from the cluster */
		int serving = __atomic_load_n(&n->serving, __ATOMIC_ACQUIRE);
		if (!serving)
			leader_catch_up(n);
		else
			replay_maintain(n->exec.replay); /* connections of earlier views linger */
		if (serving)
			__atomic_store_n(&n->exec.applied,
					 __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE),
					 __ATOMIC_RELAXED);
		uint64_t tail = __atomic_load_n(&n->lead.tail, __ATOMIC_ACQUIRE);
		n->status->log_pos = tail;
		n->status->reclaim_pos = leader_reclaim_pos(n, tail);
		/* No room for a new request (node_input_room's headroom and
		 * reserve), or for a new view's NOOP: writes wait for recovery
		 * points to free the log; apus status says why. */
		int full = tail + 4ULL * n->cfg.max_entry + rest_reserve(n) - n->status->reclaim_pos >
			   n->log_size;
		if (!full)
			store64(&n->status->log_full_ms, 0);
		else if (!load64(&n->status->log_full_ms))
			store64(&n->status->log_full_ms, realtime_ms());
		/* Ready to serve once a majority (counting us) receives entries
		 * and our server is up to date; later peers join when they can. */
		n->status->ready =
			serving && __builtin_popcount(__atomic_load_n(&n->connected, __ATOMIC_ACQUIRE) &
						      __atomic_load_n(&n->voters, __ATOMIC_ACQUIRE)) +
						   1 >= __atomic_load_n(&n->quorum, __ATOMIC_ACQUIRE);
		if (hook_due && n->status->ready) {
			hook_due = 0;
			hook_leader_change(n);
		}
		node_update_status(n);
		if (serving) {
			nanosleep(&period, NULL);
		} else {
			uint32_t seen = n->ops->bell(n->tp);
			n->ops->wait(n->tp, seen, 1000);
		}
	}
}
