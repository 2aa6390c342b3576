/* The leader: propose path (design §3 L2-L4), commit, heartbeats, and the
 * start-up copy of the log to a peer that arrives late. */
#define LOG_PREFIX "leader: "
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "futex.h"
#include "logger.h"
#include "node.h"

static int peer_connected(struct node *n, int peer)
{
	return __atomic_load_n(&n->connected, __ATOMIC_ACQUIRE) & (1u << peer);
}

/* Log before this position may be overwritten: every backup applied it. */
static uint64_t leader_reclaim_pos(struct node *n)
{
	uint64_t min = UINT64_MAX;

	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self) {
			uint64_t a = load64(&n->ctl->peer[k].applied_end);
			if (a < min)
				min = a;
		}
	return min == UINT64_MAX ? __atomic_load_n(&n->tail, __ATOMIC_ACQUIRE) : min;
}

/* Tells every peer the commit index; backups keep the largest they saw. */
static void leader_publish_commit(struct node *n, uint64_t commit)
{
	for (int k = 0; k < n->cfg.nnodes; k++) {
		if (k == n->self || !peer_connected(n, k))
			continue;
		n->ops->write(n->tp, k, offsetof(struct region_ctl, lead_commit), &commit, 8);
		n->ops->ring(n->tp, k);
	}
}

static void leader_set_commit(struct node *n, uint64_t idx)
{
	uint64_t cur = __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE);

	while (cur < idx)
		if (__atomic_compare_exchange_n(&n->commit, &cur, idx, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			store64(&n->ctl->lead_commit, idx);
			leader_publish_commit(n, idx);
			return;
		}
}

/* Commit from the backups' cumulative acks: the quorum-th largest acked
 * index (this node counts with what it has persisted). */
static void leader_commit_from_peers(struct node *n)
{
	uint64_t acked[APUS_MAX_NODES];
	int cnt = 0;

	for (int k = 0; k < n->cfg.nnodes; k++)
		acked[cnt++] = k == n->self ? __atomic_load_n(&n->self_acked, __ATOMIC_ACQUIRE)
					    : load64(&n->ctl->peer[k].acked);
	/* Insertion sort, descending: at most 8 values. */
	for (int i = 1; i < cnt; i++)
		for (int j = i; j > 0 && acked[j] > acked[j - 1]; j--) {
			uint64_t t = acked[j];
			acked[j] = acked[j - 1];
			acked[j - 1] = t;
		}
	leader_set_commit(n, acked[n->quorum - 1]);
}

/* View, commit and a counter into PEER's control words: one 8-byte write
 * each, so they never tear against the commit word other threads write. */
static void leader_heartbeat(struct node *n, int peer, uint64_t hb)
{
	uint64_t commit = __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE);

	n->ops->write(n->tp, peer, offsetof(struct region_ctl, lead_view), &n->view, 8);
	n->ops->write(n->tp, peer, offsetof(struct region_ctl, lead_commit), &commit, 8);
	n->ops->write(n->tp, peer, offsetof(struct region_ctl, lead_hb), &hb, 8);
	n->ops->ring(n->tp, peer);
}

/* Copies the whole log written so far to PEER, then lets it receive new
 * entries.  Called with n->lock held.  Only possible while nothing was
 * reclaimed: a peer never seen pins reclamation at 0, so this holds. */
static void leader_connect_peers_locked(struct node *n)
{
	for (int k = 0; k < n->cfg.nnodes; k++) {
		struct peer_slot *ps = &n->ctl->peer[k];
		int rc;

		if (k == n->self || peer_connected(n, k))
			continue;
		rc = n->ops->connect(n->tp, k);
		if (rc)
			continue;
		if (n->tail > n->log_size) {
			/* Its log starts at entry 1, which we no longer hold: it
			 * must not pin reclamation while it cannot catch up. */
			if (ps->applied_end != UINT64_MAX)
				pr_err("node %d joined after the log wrapped; it needs a checkpoint to catch up",
				       k);
			store64(&ps->applied_end, UINT64_MAX);
			continue;
		}
		/* A fresh log on its side: whatever an earlier incarnation
		 * reported counts for nothing now. */
		store64(&ps->acked, 0);
		store64(&ps->applied, 0);
		store64(&ps->applied_end, 0);
		if (n->tail)
			n->ops->write(n->tp, k, REGION_CTL_SIZE, n->log, n->tail);
		leader_heartbeat(n, k, 0);
		__atomic_or_fetch(&n->connected, 1u << k, __ATOMIC_RELEASE);
		pr_info("node %d connected (%llu log bytes copied)", k, (unsigned long long)n->tail);
	}
}

/* Notices peers that restarted or died since we reached them. */
static void leader_check_peers(struct node *n)
{
	for (int k = 0; k < n->cfg.nnodes; k++) {
		if (k == n->self || !peer_connected(n, k) || n->ops->check(n->tp, k) == 0)
			continue;
		__atomic_and_fetch(&n->connected, ~(1u << k), __ATOMIC_RELEASE);
		pr_warn("node %d restarted or died: it receives nothing until it is back", k);
	}
}

/* Sleeps on our doorbell until COND(n, arg) holds; spins first.  IDLE, if
 * given, runs before each sleep. */
static void leader_wait(struct node *n, int (*cond)(struct node *, uint64_t), uint64_t arg,
			void (*idle)(struct node *))
{
	uint64_t start = now_ns();
	unsigned spins = 0;

	while (!cond(n, arg)) {
		if (++spins < 64 || now_ns() - start < n->spin_ns) {
			cpu_relax();
			continue;
		}
		if (idle)
			idle(n);
		uint32_t seen = n->ops->bell(n->tp);
		if (cond(n, arg))
			return;
		n->ops->wait(n->tp, seen, n->cfg.heartbeat_ms * 1000);
	}
}

static int space_free(struct node *n, uint64_t end)
{
	return end - leader_reclaim_pos(n) <= n->log_size;
}

/* While the log is full: backups apply only what is committed, so keep
 * commit moving, and let a late peer in (it pins reclamation at 0). */
static void space_idle(struct node *n)
{
	leader_commit_from_peers(n);
	leader_connect_peers_locked(n);
}

/* Sends log bytes [pos, pos+len) to every connected backup. */
static void leader_replicate(struct node *n, uint64_t pos, size_t len)
{
	uint64_t off = node_log_off(n, pos) + ENTRY_REPLICATED_OFF;
	const char *src = n->log + pos % n->log_size + ENTRY_REPLICATED_OFF;

	for (int k = 0; k < n->cfg.nnodes; k++) {
		if (k == n->self || !peer_connected(n, k))
			continue;
		int rc = n->ops->write(n->tp, k, off, src, len - ENTRY_REPLICATED_OFF);
		if (rc)
			pr_warn("write to node %d failed: %s", k, strerror(-rc));
	}
}

/* Appends one entry (LEN data bytes of IOV from SKIP on).  Called with
 * n->lock held.  Returns the entry's position. */
static uint64_t leader_append(struct node *n, struct entry_meta *m, const struct iovec *iov,
			      int iovcnt, size_t skip, uint32_t len)
{
	size_t need = entry_size(len);
	int wrap;
	uint64_t pos = log_pos_place(n->log_size, n->tail, need, &wrap);

	leader_wait(n, space_free, pos + need, space_idle);
	m->idx = n->last_idx + 1;
	m->committed = __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE);
	if (wrap && log_pos_marker_fits(n->log_size, n->tail)) {
		struct entry_meta w = *m;

		w.type = ENTRY_WRAP;
		w.conn = (struct viewstamp){ 0, 0 };
		size_t l = entry_write(n->log + n->tail % n->log_size, &w, NULL, 0, 0, 0);
		node_persist(n, n->tail, l);
		leader_replicate(n, n->tail, l);
	}
	size_t l = entry_write(n->log + pos % n->log_size, m, iov, iovcnt, skip, len);
	node_persist(n, pos, l);
	leader_replicate(n, pos, l);
	__atomic_store_n(&n->last_idx, m->idx, __ATOMIC_RELEASE);
	__atomic_store_n(&n->tail, pos + need, __ATOMIC_RELEASE);
	return pos;
}

struct entry_wait {
	uint64_t idx;
	const struct entry_hdr *e;
};

static int entry_committed(struct node *n, uint64_t arg)
{
	const struct entry_wait *w = (const void *)(uintptr_t)arg;
	int votes = 1;

	if (__atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) >= w->idx)
		return 1;
	/* Backup k writes our index into reply[k] once it holds the entry;
	 * a backup acks in log order, so it also holds every earlier one. */
	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && __atomic_load_n(&w->e->reply[k], __ATOMIC_ACQUIRE) == w->idx)
			votes++;
	if (votes >= n->quorum) {
		leader_set_commit(n, w->idx);
		return 1;
	}
	return 0;
}

/* Appends an event (split into entries of at most max_entry bytes) and
 * sends it to the backups; does not wait.  Returns the last entry's index
 * and sets *LAST_POS to its position. */
static uint64_t leader_submit(struct node *n, int type, struct viewstamp conn,
			      const struct iovec *iov, int iovcnt, size_t len, struct viewstamp *vs,
			      uint64_t *last_pos)
{
	struct entry_meta m = { .view = n->view, .conn = conn, .type = (uint16_t)type,
				.node = (uint8_t)n->self };
	size_t done = 0;

	pthread_mutex_lock(&n->lock);
	do {
		uint32_t chunk = len - done > n->cfg.max_entry ? n->cfg.max_entry
							       : (uint32_t)(len - done);
		if (type == ENTRY_ACCEPT)
			m.conn = (struct viewstamp){ n->view, n->last_idx + 1 };
		*last_pos = leader_append(n, &m, iov, iovcnt, done, chunk);
		if (!done && vs)
			*vs = (struct viewstamp){ m.view, m.idx };
		done += chunk;
	} while (done < len);
	pthread_mutex_unlock(&n->lock);

	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && peer_connected(n, k))
			n->ops->ring(n->tp, k);
	uint64_t cur = __atomic_load_n(&n->self_acked, __ATOMIC_ACQUIRE);
	while (cur < m.idx &&
	       !__atomic_compare_exchange_n(&n->self_acked, &cur, m.idx, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	return m.idx;
}

int node_propose(struct node *n, int type, struct viewstamp conn, const struct iovec *iov,
		 int iovcnt, size_t len, struct viewstamp *vs)
{
	uint64_t last_pos, last_idx;

	if (n->role != ROLE_LEADER)
		return -EPERM;
	last_idx = leader_submit(n, type, conn, iov, iovcnt, len, vs, &last_pos);
	if (n->cfg.commit_wait == COMMIT_WAIT_REPLY)
		return 0;	/* node_wait_output() waits before the reply leaves */

	struct entry_wait w = { last_idx,
				(const struct entry_hdr *)(n->log + last_pos % n->log_size) };
	leader_wait(n, entry_committed, (uint64_t)(uintptr_t)&w, NULL);
	return 0;
}

int node_record(struct node *n, int type, const void *data, size_t len)
{
	struct iovec iov = { (void *)data, len };
	uint64_t last_pos;

	if (n->role != ROLE_LEADER)
		return -EPERM;
	leader_submit(n, type, (struct viewstamp){ 0, 0 }, &iov, 1, len, NULL, &last_pos);
	return 0;
}

static int all_committed(struct node *n, uint64_t idx)
{
	if (__atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) >= idx)
		return 1;
	leader_commit_from_peers(n);
	return __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) >= idx;
}

void node_wait_output(struct node *n)
{
	uint64_t idx = __atomic_load_n(&n->last_idx, __ATOMIC_ACQUIRE);

	if (n->role == ROLE_LEADER && __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) < idx)
		leader_wait(n, all_committed, idx, NULL);
}

/* The leader's own thread: connects peers, sends heartbeats (view, commit,
 * a counter), keeps commit moving and the status block fresh. */
void *leader_main(void *arg)
{
	struct node *n = arg;
	uint64_t hb = 0;
	struct timespec period = { n->cfg.heartbeat_ms / 1000,
				   (long)(n->cfg.heartbeat_ms % 1000) * 1000000 };
	uint32_t all = ((1u << n->cfg.nnodes) - 1) & ~(1u << n->self);

	while (!__atomic_load_n(&n->stopping, __ATOMIC_RELAXED)) {
		/* Acks may arrive while no proposer waits (commit_wait = reply). */
		n->ops->poll(n->tp);
		leader_check_peers(n);
		if ((__atomic_load_n(&n->connected, __ATOMIC_ACQUIRE) & all) != all &&
		    pthread_mutex_trylock(&n->lock) == 0) {
			leader_connect_peers_locked(n);
			pthread_mutex_unlock(&n->lock);
		}
		leader_commit_from_peers(n);
		hb++;
		for (int k = 0; k < n->cfg.nnodes; k++)
			if (k != n->self && peer_connected(n, k))
				leader_heartbeat(n, k, hb);
		__atomic_store_n(&n->applied, __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE),
				 __ATOMIC_RELAXED);
		n->ctl->status.log_pos = __atomic_load_n(&n->tail, __ATOMIC_ACQUIRE);
		n->ctl->status.reclaim_pos = leader_reclaim_pos(n);
		/* Ready to serve once a majority (counting us) receives entries;
		 * later peers get the log copied when they arrive. */
		n->ctl->status.ready = __builtin_popcount(__atomic_load_n(&n->connected, __ATOMIC_ACQUIRE) &
							  all) + 1 >= n->quorum;
		node_update_status(n);
		nanosleep(&period, NULL);
	}
	return NULL;
}
