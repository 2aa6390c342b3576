/* The backup's role loop: follow the leader of the newest view, join it
 * (it copies us its log from where our server stands and says so in the
 * sync words), agree (check, persist and ack each entry as it lands),
 * learn the commit index, execute committed entries through replay, watch
 * the leader's heartbeat, answer vote requests, and stand for election
 * when the leader is gone. */
#define LOG_PREFIX "backup: "
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic64.h"
#include "common/futex.h"
#include "common/logger.h"
#include "coordinator/node/members.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/node/replay.h"
#include "common/spin.h"

#define AGREE_BATCH 256

/* How long a join may go unanswered before we ask again. */
#define JOIN_RETRY_NS (5ULL * 1000000000ULL)

struct backup {
	struct node *n;
	int leader;		/* whom we follow, -1: nobody */
	int synced;		/* the leader's sync words for this view arrived */
	uint64_t pos, expect;	/* next entry to agree on */
	uint64_t checked_from;	/* agree() checked entries checked_from..expect-1 whole */
	uint64_t sync_idx;	/* entries after this one must carry our view */
	uint64_t sync_from, sync_upto;	/* the sync we acted on */
	uint64_t commit;
	uint64_t last_hb_ns;	/* when we last reported liveness to the leader */
	uint64_t join_ns;	/* when we last asked to join */
	uint64_t join_seq;	/* our current join: the leader's copy names it */
	uint64_t join_asked_ns;	/* when we first asked for this join (0: not yet) */
	int join_answered;	/* the leader's sync words for this join arrived */
	uint64_t snap_told;	/* the recovery point position the leader knows of */
	uint64_t own_upto;	/* left behind: execute our own log up to here, then join */
	uint64_t agreed_ns;	/* when agreement last moved (or we synced) */
	uint64_t seen_hb;	/* the leader's heartbeat word as last seen */
	uint64_t hb_at_ns;	/* when it last moved (or we started to follow) */
	int suspected;		/* silent for suspect_ms, or gone */
	int reached;		/* we reached the leader we follow at least once */
	int reach_err;		/* the last error connecting to it we logged, and when */
	uint64_t reach_err_ns;
	uint64_t stand_at_ns;	/* when to stand for election if still leaderless */
	uint64_t slot_hb[APUS_MAX_NODES];	/* each lead slot's heartbeat as last seen */
	uint64_t slot_moved_ns[APUS_MAX_NODES];	/* and when it last moved */
	unsigned backoff;	/* failed candidacies in a row */
};

static void write_leader(struct backup *b, size_t off, const void *val, size_t len)
{
	b->n->ops->write(b->n->tp, b->leader, off, val, len);
}

/* When to stand after losing leader L (-1: none known), so that two
 * backups rarely stand at the same moment; the one that does not stand
 * votes for the one that does.  The first try goes by rank (the node after
 * L stands first, the next half a period later, plus a little noise):
 * fast and mostly without split votes.  Later tries wait a random time of
 * up to two periods, doubled per failed candidacy (capped). */
static uint64_t backoff_ns(struct backup *b, int l)
{
	struct node *n = b->n;
	uint64_t period = (uint64_t)n->cfg.heartbeat_ms * 1000000ULL;
	unsigned shift = b->backoff < 4 ? b->backoff : 4;

	if (!b->backoff && l >= 0) {
		int rank = (n->self - l - 1 + n->cfg.nnodes) % n->cfg.nnodes;
		return (uint64_t)rank * period / 2 + (uint64_t)sys.random() % (period / 16 + 1) + 1;
	}
	return (uint64_t)sys.random() % ((2 * period) << shift) + 1;
}

/* Asks the leader for a fresh copy of its log: a new join, which only
 * a copy made for it answers (older sync words in our region do not). */
static void rejoin(struct backup *b)
{
	uint64_t last = load64(&b->n->status->join_seq);

	b->synced = 0;
	b->join_seq = (b->join_seq > last ? b->join_seq : last) + 1;
	store64(&b->n->status->join_seq, b->join_seq);
	b->join_ns = 0;
	b->join_asked_ns = 0;
	b->join_answered = 0;
	b->snap_told = UINT64_MAX;	/* a new leader knows nothing of it */
}

/* Starts following LEADER in VIEW: our agreement restarts from what our
 * server executed, until the leader's copy of its log says more. */
static void follow(struct backup *b, int leader, uint64_t view, uint64_t now)
{
	struct node *n = b->n;

	b->leader = leader;
	b->own_upto = 0;
	b->pos = n->exec.pos;
	b->expect = b->checked_from = n->exec.idx;
	rejoin(b);
	b->seen_hb = load64(&n->ctl->lead[leader].hb);
	b->hb_at_ns = now;
	b->suspected = 0;
	b->reached = 0;
	b->reach_err = 0;
	b->backoff = 0;
	if (n->ctl->dur.view != view) {
		n->ctl->dur.view = view;
		node_save_durable(n);
	}
	__atomic_store_n(&n->connected, 0, __ATOMIC_RELEASE);
	/* We may have fenced it in an election that came to nothing. */
	n->ops->unfence(n->tp, leader);
	node_set_role(n, ROLE_BACKUP, leader, view);
	pr_info("following node %d, leader of view %llu", leader, (unsigned long long)view);
}

/* Whether we may follow a leader of view V: not one older than a view we
 * voted in (for ourselves or another), ever.  The candidate could win
 * without the entries we would ack (Paxos' promise); the old leader
 * learns of the newer view from the request and steps down. */
static int vote_allows(struct backup *b, uint64_t v)
{
	return v >= b->n->ctl->dur.voted_view;
}

/* Looks for a leader in the lead slots: one of a newer view than ours is
 * followed at once; without a leader, the live one (its heartbeat moves)
 * of the newest view is, as the vote allows. */
static void find_leader(struct backup *b, uint64_t now)
{
	struct node *n = b->n;
	uint64_t view = __atomic_load_n(&n->view, __ATOMIC_ACQUIRE), best_v = 0;
	uint64_t live_ns = (uint64_t)n->cfg.suspect_ms * 1000000ULL;
	int best = -1;

	for (int k = 0; k < n->cfg.nnodes; k++) {
		uint64_t hb, v;

		if (k == n->self || !(hb = load64(&n->ctl->lead[k].hb)))
			continue;
		/* Live means seen to move: a slot's first value may be the last
		 * word of a leader long dead. */
		if (b->slot_hb[k] && hb != b->slot_hb[k])
			b->slot_moved_ns[k] = now;
		b->slot_hb[k] = hb;
		v = load64(&n->ctl->lead[k].view);
		if (v > view && vote_allows(b, v)) {
			follow(b, k, v, now);
			return;
		}
		if (b->leader < 0 && b->slot_moved_ns[k] && now - b->slot_moved_ns[k] < live_ns &&
		    (best < 0 || v > best_v)) {
			best = k;
			best_v = v;
		}
	}
	if (best >= 0 && vote_allows(b, best_v))
		follow(b, best, best_v, now);
}

/* The leader copied its log to us when the sync words name our view and
 * incarnation; a new copy (after a lost connection) is taken too. */
static void take_sync(struct backup *b)
{
	struct node *n = b->n;
	struct sync_words *s = &n->ctl->sync;
	uint64_t view = load64(&s->view);	/* written last: pairs with the release */

	if (view != __atomic_load_n(&n->view, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&s->inc, __ATOMIC_RELAXED) != n->ctl->incarnation ||
	    __atomic_load_n(&s->seq, __ATOMIC_RELAXED) != b->join_seq)
		return;
	b->join_answered = 1;
	uint64_t from = __atomic_load_n(&s->from_pos, __ATOMIC_RELAXED);
	uint64_t from_idx = __atomic_load_n(&s->from_idx, __ATOMIC_RELAXED);
	uint64_t upto = __atomic_load_n(&s->sync_idx, __ATOMIC_RELAXED);
	if (b->synced && from == b->sync_from && upto == b->sync_upto)
		return;
	if (from == SYNC_BEHIND) {
		uint64_t own = from_idx < upto ? from_idx : upto, pos = n->exec.pos;
		/* Our own log is the leader's up to from_idx: execute it, then
		 * join again from where it leaves our server; if it still holds
		 * our server's next entry (a server restored from an old image
		 * may stand before our log's start too). */
		if (own >= n->exec.idx && node_entry_at(n, &pos, n->exec.idx)) {
			if (b->own_upto != own)
				pr_info("node %d's log no longer holds entry %llu, but ours is its log up "
					"to %llu: executing our own log up to %llu, then joining again",
					b->leader, (unsigned long long)n->exec.idx,
					(unsigned long long)from_idx, (unsigned long long)own);
			b->own_upto = own;
			return;
		}
		if (!n->status->behind)
			pr_err("node %d's log no longer holds entry %llu, the next this server needs: "
			       "this node must be rebuilt from a peer (apus rebuild --node %d; its "
			       "guard does it when it runs)",
			       b->leader, (unsigned long long)n->exec.idx, n->self);
		n->status->behind = 1;
		return;
	}
	n->status->behind = 0;
	/* Past from_idx our log is now the leader's: entries we held there
	 * may be gone; agreement records the newest again. */
	node_set_hint(n, 0, 0, 0);
	b->synced = 1;
	b->agreed_ns = now_ns();
	b->sync_from = from;
	b->sync_upto = upto;
	b->sync_idx = upto;
	b->pos = from;
	b->expect = b->checked_from = from_idx;
	__atomic_or_fetch(&n->connected, 1u << b->leader, __ATOMIC_RELEASE);
	pr_info("node %d copied us its log from entry %llu to %llu", b->leader,
		(unsigned long long)from_idx, (unsigned long long)upto);
}

/* Tells the leader our recovery point (it reclaims no log a majority's
 * snapshots do not cover), once per leader and after each snapshot. */
static void tell_snapshot(struct backup *b)
{
	struct node *n = b->n;
	uint64_t w[2] = { __atomic_load_n(&n->snap.idx, __ATOMIC_ACQUIRE),
			  __atomic_load_n(&n->snap.pos, __ATOMIC_ACQUIRE) };

	if (w[1] == b->snap_told)
		return;
	write_leader(b, offsetof(struct region_ctl, peer[n->self].snap_idx), w, sizeof(w));
	b->snap_told = w[1];
}

/* Where entry IDX, the last of our log (which ends at END), starts; 0 if
 * it is not past our server's position. */
static uint64_t last_entry_at(struct node *n, uint64_t idx, uint64_t end)
{
	struct log_hint *h = &n->ctl->hint;

	if (idx < n->exec.idx)
		return 0;
	if (__atomic_load_n(&h->idx, __ATOMIC_RELAXED) == idx)
		return __atomic_load_n(&h->pos, __ATOMIC_RELAXED);
	/* Walk from our server's position (no hint: a log just copied). */
	uint64_t pos = n->exec.pos, at = 0;
	for (uint64_t i = n->exec.idx; i <= idx; i++) {
		uint64_t p = pos;
		const struct entry_hdr *e = node_entry_at(n, &p, i);
		if (!e)
			return 0;
		at = p;
		pos = p + entry_size(e->data_sz);
	}
	return pos == end ? at : 0;
}

/* Asks the leader to copy us its log from where our server stands. */
static void join(struct backup *b, uint64_t now)
{
	struct node *n = b->n;
	uint64_t end_view, end_idx, end_pos;
	struct {
		uint64_t end_idx, end_view, end_at, applied, applied_end, inc, seq, view;
	} j;

	if (b->join_ns && now - b->join_ns < (uint64_t)n->cfg.heartbeat_ms * 1000000ULL)
		return;
	/* The leader answers each join once; an answer lost on the way (its
	 * connection to us broke, or led to a process we no longer are) is
	 * never sent again for the same join: ask a new one. */
	if (!b->join_asked_ns) {
		b->join_asked_ns = now;
	} else if (!b->join_answered && now - b->join_asked_ns > JOIN_RETRY_NS) {
		pr_warn("node %d has not answered our join for %llu ms: asking again", b->leader,
			(unsigned long long)((now - b->join_asked_ns) / 1000000));
		rejoin(b);
		b->join_asked_ns = now;
	}
	node_log_end(n, &end_view, &end_idx, &end_pos);
	j.end_idx = end_idx;
	j.end_view = end_view;
	j.end_at = last_entry_at(n, end_idx, end_pos);
	j.applied = n->exec.idx - 1;
	j.applied_end = n->exec.pos;
	j.inc = n->ctl->incarnation;
	j.seq = b->join_seq;
	j.view = n->view;
	if (!j.end_at)
		j.end_idx = 0;	/* nothing of our own past our server */
	b->join_ns = now;
	write_leader(b, offsetof(struct region_ctl, peer[n->self].join_end_idx), &j, sizeof(j));
	n->ops->ring(n->tp, b->leader);
}

static int agree(struct backup *b)
{
	struct node *n = b->n;
	uint64_t last_pos = 0, last_view = 0;
	int got = 0;

	for (; got < AGREE_BATCH; got++) {
		uint64_t pos = b->pos;
		const struct entry_hdr *e = node_entry_at(n, &pos, b->expect);

		if (!e)
			break;
		/* Past the copied log only the current leader's entries count:
		 * older bytes there are what a previous view left behind. */
		if (e->idx > b->sync_idx && e->view != n->view)
			break;
		size_t sz = entry_size(e->data_sz);
		node_persist(n, pos, sz);
		last_pos = pos;
		last_view = e->view;
		/* The ack: our index into the entry's reply slot in the leader's log. */
		write_leader(b, node_log_off(n, pos) + offsetof(struct entry_hdr, reply[n->self]),
			     &e->idx, 8);
		if (e->committed > b->commit)
			b->commit = e->committed;
		b->pos = pos + sz;
		b->expect++;
	}
	if (got) {
		uint64_t acked = b->expect - 1;
		node_set_hint(n, acked, last_pos, last_view);
		write_leader(b, offsetof(struct region_ctl, peer[n->self].acked), &acked, 8);
		n->ops->ring(n->tp, b->leader);
	}
	return got;
}

static void leader_gone(struct backup *b, uint64_t now, const char *why);

static int connect_leader(struct backup *b, uint64_t now)
{
	struct node *n = b->n;
	int rc;

	if (n->ops->connected(n->tp, b->leader))
		return b->reached = 1;
	rc = n->ops->connect(n->tp, b->leader);
	if (rc == 0) {
		pr_info("reached leader node %d", b->leader);
		return b->reached = 1;
	}
	/* A leader we never reached may just not be up yet (a cluster
	 * starting): its heartbeat, not a refusal, decides then. */
	if (rc == -ECONNREFUSED && b->reached) {
		leader_gone(b, now, "refuses connections: its process is gone");
	} else if (rc == -EACCES) {
		/* It fenced this process of ours (shm: taken for a leader it
		 * deposed), which it never admits again: come back as a new
		 * incarnation, the way a deposed leader does. */
		pr_warn("leader node %d fenced this process: re-executing the server as a new one",
			b->leader);
		node_set_role(n, ROLE_DEPOSED, b->leader, n->view);
	} else if (rc != -EAGAIN && (rc != b->reach_err || now - b->reach_err_ns > 10000000000ULL)) {
		/* Once per error and leader, then every 10 s: this runs every loop. */
		pr_warn("cannot reach leader node %d: %s", b->leader, strerror(-rc));
		b->reach_err = rc;
		b->reach_err_ns = now;
	}
	return 0;
}

/* Failure detection: the leader's heartbeat word must keep moving; a
 * leader silent for suspect_ms, or whose process is gone, is suspected. */
static void watch_leader(struct backup *b, uint64_t now)
{
	struct node *n = b->n;
	uint64_t hb, age;

	if (b->leader < 0) {
		n->status->suspects_leader = 0;
		return;
	}
	hb = load64(&n->ctl->lead[b->leader].hb);
	if (hb != b->seen_hb) {
		if (b->suspected)
			pr_info("leader node %d is alive again (silent for %llu ms)", b->leader,
				(unsigned long long)((now - b->hb_at_ns) / 1000000));
		b->seen_hb = hb;
		b->hb_at_ns = now;
		b->suspected = 0;
	}
	age = (now - b->hb_at_ns) / 1000000;
	if (!b->suspected && age >= (uint64_t)n->cfg.suspect_ms) {
		b->suspected = 1;
		b->stand_at_ns = now + backoff_ns(b, b->leader);
		pr_warn("leader node %d suspected: no heartbeat for %llu ms", b->leader,
			(unsigned long long)age);
	}
	n->status->leader_hb_age_ms = age;
	n->status->suspects_leader = (uint32_t)b->suspected;
}

/* The leader's process is gone (its transport says so): no need to wait
 * for its heartbeat to go stale. */
static void leader_gone(struct backup *b, uint64_t now, const char *why)
{
	if (!b->suspected) {
		pr_warn("leader node %d %s", b->leader, why);
		b->suspected = 1;
		b->stand_at_ns = now + backoff_ns(b, b->leader);
	}
	__atomic_and_fetch(&b->n->connected, ~(1u << b->leader), __ATOMIC_RELEASE);
}

/* Asks the transport whether the leader is still there: a connection
 * lost is reached again (a refusal means its process is gone), a peer
 * restarted or dead is suspected at once.  0 if it is there. */
static int check_leader(struct backup *b, uint64_t now)
{
	struct node *n = b->n;
	int rc = n->ops->check(n->tp, b->leader);

	if (rc == -ENOTCONN) {
		/* Lost, not restarted (as far as we know): reach it again, and
		 * have it copy us what went missing meanwhile. */
		__atomic_and_fetch(&n->connected, ~(1u << b->leader), __ATOMIC_RELEASE);
		rejoin(b);
		return connect_leader(b, now) ? 0 : -ENOTCONN;
	}
	if (rc)
		leader_gone(b, now, "restarted or died");
	return rc;
}

/* Entries lost on the way (a connection that broke and came back): the
 * leader committed entry `expect` without us and it has not come for
 * suspect_ms.  Its copy of the log brings it. */
static void watch_gap(struct backup *b, uint64_t now)
{
	struct node *n = b->n;

	if (load64(&n->ctl->lead[b->leader].commit) < b->expect) {
		b->agreed_ns = now;	/* nothing is missing */
		return;
	}
	/* (A join answered in this very pass set agreed_ns after NOW: the
	 * difference would wrap, and every copy be asked for again at once.) */
	if (now < b->agreed_ns || now - b->agreed_ns < (uint64_t)n->cfg.suspect_ms * 1000000ULL)
		return;
	pr_warn("entry %llu never arrived, though node %d committed it: joining again",
		(unsigned long long)b->expect, b->leader);
	rejoin(b);
}

/* Work is waiting: a new entry landed or commit moved. */
static int work_pending(struct backup *b)
{
	uint64_t pos = b->pos;

	if (b->leader < 0 || !b->synced)
		return 0;
	if (load64(&b->n->ctl->lead[b->leader].commit) > b->commit && b->n->exec.idx < b->expect)
		return 1;
	return node_entry_at(b->n, &pos, b->expect) != NULL;
}

/* A backup whose acks make the quorum, synced and spinning: watches the
 * next entry's header alone until it lands, for at most AWAIT_NS, rather
 * than going round the whole loop (transport poll, snapshot and checkpoint
 * polls, leader and election checks) between two looks.  The leader's commit wait spins for as long as our ack takes,
 * on the server's thread: this is most of what a commit costs it.  The
 * loop's other duties wait AWAIT_NS at most; heartbeats are milliseconds. */
#define AWAIT_NS 5000

static void await_entry(struct backup *b)
{
	uint64_t start = now_ns();

	for (unsigned i = 1;; i++) {
		if (node_entry_landed(b->n, b->pos, b->expect) ||
		    __atomic_load_n(&b->n->stopping, __ATOMIC_RELAXED))
			return;
		cpu_relax();
		/* A pause lasts 10 to 140 cycles, whatever the CPU: time it. */
		if (!(i % 32) && now_ns() - start > AWAIT_NS)
			return;
	}
}

/* Without a live leader long enough (and after our back-off): stand. */
static int time_to_stand(struct backup *b, uint64_t now)
{
	if (b->leader >= 0 && !b->suspected)
		return 0;
	/* Our server cannot reach the end of our log: as leader we would
	 * serve a partial state.  We still vote for a node that can. */
	if (!__atomic_load_n(&b->n->snap.recoverable, __ATOMIC_ACQUIRE))
		return 0;
	/* A learner catches up; it never leads (members.h). */
	if (!node_votes(b->n, b->n->self))
		return 0;
	/* We just stepped down as a leader whose server took nothing: let
	 * another stand first (leader.c, leader_can_catch_up). */
	if (now < b->n->exec.no_stand_until_ns)
		return 0;
	return now >= b->stand_at_ns;
}

void backup_run(struct node *n)
{
	struct backup b = { .n = n, .leader = -1 };
	/* We check on the leader (and tell it we live) four times a period:
	 * a dead leader's transport tells us long before its heartbeat goes
	 * stale, and that is most of a failover's time. */
	int check_us = n->cfg.heartbeat_ms * 250 > 0 ? n->cfg.heartbeat_ms * 250 : 1;
	uint64_t now = now_ns(), idle_since = now;
	struct spin_window spin;
	int start_leader = __atomic_load_n(&n->leader, __ATOMIC_ACQUIRE);

	srandom((unsigned)(now ^ (uint64_t)n->self * 7919 ^ (uint64_t)getpid()));
	spin_window_init(&spin, n->spin_ns, n->spin_max_ns);
	/* A backup serves no clients: it is ready as soon as it runs. */
	n->status->ready = 1;
	b.stand_at_ns = now + (uint64_t)n->cfg.suspect_ms * 1000000ULL + backoff_ns(&b, -1);
	if (start_leader >= 0 && start_leader != n->self)
		follow(&b, start_leader, n->view, now);

	while (!__atomic_load_n(&n->stopping, __ATOMIC_RELAXED)) {
		int progress = 0, agreed = 0, waiting_server;

		if (node_role(n) == ROLE_LEADER || node_role(n) == ROLE_DEPOSED)
			return;
		now = now_ns();
		n->ops->poll(n->tp);
		/* Back from a checkpoint: our server is older than our log. */
		if (node_checkpoint_poll(n) && b.leader >= 0)
			rejoin(&b);
		node_snapshot_poll(n);
		find_leader(&b, now);
		/* A candidate asks: is our leader really there?  Ask the
		 * transport now rather than at the next heartbeat check. */
		if (b.leader >= 0 && !b.suspected && election_pending(n))
			check_leader(&b, now);
		if (election_answer(n, b.leader < 0 || b.suspected)) {
			b.leader = -1;
			b.synced = 0;
			/* Give the candidate time to win and heartbeat. */
			b.stand_at_ns = now + (uint64_t)n->cfg.suspect_ms * 1000000ULL + backoff_ns(&b, -1);
			continue;
		}
		watch_leader(&b, now);
		if (time_to_stand(&b, now)) {
			if (election_stand(n))
				return;
			b.backoff++;
			b.leader = -1;
			b.synced = 0;
			b.stand_at_ns = now_ns() + backoff_ns(&b, -1);
			continue;
		}
		if (b.leader >= 0 && !b.suspected && connect_leader(&b, now)) {
			take_sync(&b);
			if (!b.synced)
				join(&b, now);
			else if (agree(&b) > 0) {
				progress = agreed = 1;
				b.agreed_ns = now;
			} else {
				watch_gap(&b, now);
			}
		}
		if (b.leader >= 0 && !b.synced && b.own_upto >= n->exec.idx) {
			progress |= node_execute(n, b.own_upto, 0);
			if (n->exec.idx > b.own_upto)
				rejoin(&b);
		}
		if (b.leader >= 0 && b.synced) {
			uint64_t lc = load64(&n->ctl->lead[b.leader].commit);
			if (lc > b.commit)
				b.commit = lc;
			__atomic_store_n(&n->commit, b.commit, __ATOMIC_RELAXED);
			progress |= node_execute(n, b.commit < b.expect - 1 ? b.commit : b.expect - 1,
						 n->exec.idx >= b.checked_from ? b.expect - 1 : 0);
		}
		/* Turns the server has yet to take, or entries it has no room for. */
		waiting_server = replay_maintain(n->exec.replay) ||
				 (b.synced && n->exec.idx < b.expect && n->exec.idx <= b.commit);

		if (now - b.last_hb_ns > (uint64_t)check_us * 1000) {
			b.last_hb_ns = now;
			if (b.leader >= 0 && !b.suspected && check_leader(&b, now) == 0) {
				if (b.synced)
					tell_snapshot(&b);
				write_leader(&b, offsetof(struct region_ctl, peer[n->self].hb), &now, 8);
			}
			n->status->log_pos = b.pos;
			n->status->synced = b.synced && b.leader >= 0;
			node_update_status(n);
		}
		if (progress) {
			if (agreed)
				spin_window_learn(&spin, now - idle_since);
			idle_since = now;
			continue;
		}
		/* Only a backup whose acks make the quorum spins long (spin.h). */
		int fast = b.leader >= 0 && node_acks_fast(n, b.leader, n->self);
		if (now - idle_since < (fast ? spin.ns : n->spin_ns)) {
			if (fast && b.synced && !b.suspected)
				await_entry(&b);
			else
				cpu_relax();
			continue;
		}
		uint32_t seen = n->ops->bell(n->tp);
		if (work_pending(&b))
			continue;
		/* Waiting on the server: look again soon (its reads ring our
		 * doorbell when we wait for room). */
		int wait_us = waiting_server || b.leader < 0 ? 1000 : check_us;
		/* Stand when our back-off ends, not at the next heartbeat. */
		if (b.suspected && b.stand_at_ns > now && (b.stand_at_ns - now) / 1000 < (uint64_t)wait_us)
			wait_us = (int)((b.stand_at_ns - now) / 1000) + 1;
		n->ops->wait(n->tp, seen, wait_us);
	}
}
