/* Leader election on the elect array (APUS report §2.4, DARE §3.2).
 *
 * A candidate for view v writes {last_view, last_idx, v} into elect[self]
 * of every peer's region; a voter answers into vote[self] of the
 * candidate's region.  A voter grants v when it has no live leader, has
 * not voted in v or later, and the candidate's log is at least as up to
 * date as its own (last view, then last index): a majority of such votes
 * means the winner holds every committed entry.  The vote is on disk
 * before it is sent, and the voter fences its old leader first, so a
 * deposed leader can no longer land a write in a log that elects another.
 *
 * Before any of that, a pre-vote round (Raft's PreVote, Ongaro §9.6): the
 * candidate asks whether a majority would vote for it, which binds nobody
 * and fences nobody.  A backup that merely missed heartbeats (a slow
 * scheduler, a partition of its own) so cannot depose a leader that the
 * others still hear.  A leader that does see a real request for a newer
 * view steps down (election_newer_request): the majority thinks it dead. */
#define LOG_PREFIX "election: "
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

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* The highest view this node knows of. */
static uint64_t known_view(struct node *n)
{
	return max_u64(max_u64(__atomic_load_n(&n->view, __ATOMIC_ACQUIRE), n->ctl->dur.voted_view),
		       n->elect.max_seen);
}

/* Stops accepting the writes of the leader we leave (if it is still there). */
static void fence_old_leader(struct node *n, int old, int except)
{
	int rc;

	if (old < 0 || old == n->self || old == except)
		return;
	rc = n->ops->fence(n->tp, old);
	if (rc)
		pr_warn("cannot fence node %d: %s", old, strerror(-rc));
}

/* Reads candidate K's request consistently (its view word is written
 * last); 0 if there is none or it is being rewritten. */
static int read_request(struct node *n, int k, struct elect_req *out)
{
	struct elect_req *r = &n->ctl->elect[k];
	uint64_t v = load64(&r->view);	/* pairs with the writer's last-word release */

	if (!v)
		return 0;
	out->last_view = load64(&r->last_view);
	out->last_idx = load64(&r->last_idx);
	out->probe = load64(&r->probe);
	out->view = v;
	return load64(&r->view) == v;
}

/* Connects to peer K, or checks that the connection still reaches its
 * current region (a peer that fenced someone swapped it: see
 * transport_shm.c).  0 when K can be written to. */
static int reach(struct node *n, int k)
{
	if (n->ops->connected(n->tp, k) && n->ops->check(n->tp, k) == 0)
		return 0;
	return n->ops->connect(n->tp, k);
}

static void send_vote(struct node *n, int k, uint64_t granted)
{
	struct vote_slot v = { known_view(n), __atomic_load_n(&n->snap.pos, __ATOMIC_ACQUIRE),
			       granted };

	if (reach(n, k))
		return;	/* unreachable: it will time out and stand again */
	n->ops->write(n->tp, k, offsetof(struct region_ctl, vote[n->self]), &v, sizeof(v));
	n->ops->ring(n->tp, k);
}

/* Whether a candidate whose log ends at R would get our vote on the log. */
static int log_up_to_date(struct node *n, const struct elect_req *r)
{
	uint64_t lv, li, end;

	node_log_end(n, &lv, &li, &end);
	return r->last_view > lv || (r->last_view == lv && r->last_idx >= li);
}

/* A pre-vote: what we would answer, and nothing else. */
static void answer_probe(struct node *n, int k, const struct elect_req *r, int may_vote)
{
	struct probe_answer a;

	n->elect.probed[k] = r->probe;
	a.seen = known_view(n);	/* not r->view: a candidate must not learn its own */
	a.ok = may_vote && r->view > known_view(n) && log_up_to_date(n, r);
	a.round = r->probe;
	if (reach(n, k))
		return;
	n->ops->write(n->tp, k, offsetof(struct region_ctl, probe[n->self]), &a, sizeof(a));
	n->ops->ring(n->tp, k);
}

int election_pending(struct node *n)
{
	struct elect_req r;

	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && read_request(n, k, &r) &&
		    (r.probe ? r.probe != n->elect.probed[k] : r.view > n->elect.answered[k]))
			return 1;
	return 0;
}

int election_newer_request(struct node *n, uint64_t view)
{
	struct elect_req r;

	/* A request for a newer view; or a pre-vote for a view past the next
	 * one: its sender voted in (or saw) a view newer than VIEW, so it will
	 * never follow this view's leader again, and the leader would never
	 * hear of it if that request never reached us (a candidate of the
	 * cluster's first second, before the connections were up). */
	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && read_request(n, k, &r) &&
		    (r.probe ? r.view > view + 1 : r.view > view))
			return k;
	return -1;
}

int election_answer(struct node *n, int may_vote)
{
	int granted = 0;

	if (!node_votes(n, n->self))
		return 0;	/* a learner's vote counts for nobody (members.h) */
	for (int k = 0; k < n->cfg.nnodes; k++) {
		struct elect_req r;
		uint64_t lv, li, end;

		if (k == n->self || !read_request(n, k, &r))
			continue;
		if (r.probe) {
			if (r.probe != n->elect.probed[k])
				answer_probe(n, k, &r, may_vote);
			continue;
		}
		if (r.view <= n->elect.answered[k])
			continue;
		n->elect.answered[k] = r.view;
		node_log_end(n, &lv, &li, &end);
		int log_ok = log_up_to_date(n, &r);
		if (!may_vote || r.view <= known_view(n) || !log_ok) {
			pr_info("refused node %d view %llu (%s)", k, (unsigned long long)r.view,
				!may_vote ? "our leader is alive"
				: !log_ok ? "its log is behind ours" : "we know a newer view");
			n->elect.max_seen = max_u64(n->elect.max_seen, r.view);
			send_vote(n, k, 0);
			continue;
		}
		fence_old_leader(n, __atomic_load_n(&n->leader, __ATOMIC_ACQUIRE), k);
		n->ctl->dur.voted_view = r.view;
		n->ctl->dur.voted_for = (uint64_t)k;
		n->ctl->dur.view = r.view;
		node_save_durable(n);
		/* We follow nobody until the winner of r.view heartbeats. */
		__atomic_store_n(&n->connected, 0, __ATOMIC_RELEASE);
		node_set_role(n, ROLE_BACKUP, -1, r.view);
		send_vote(n, k, r.view);
		pr_info("voted for node %d in view %llu (its log ends at %llu.%llu, ours at %llu.%llu)",
			k, (unsigned long long)r.view, (unsigned long long)r.last_view,
			(unsigned long long)r.last_idx, (unsigned long long)lv, (unsigned long long)li);
		granted = 1;
	}
	return granted;
}

/* A peer leads a view at least as new as V (and is alive enough to say so). */
static int someone_leads(struct node *n, uint64_t v)
{
	for (int k = 0; k < n->cfg.nnodes; k++)
		if (k != n->self && load64(&n->ctl->lead[k].hb) &&
		    load64(&n->ctl->lead[k].view) >= v)
			return 1;
	return 0;
}

/* Writes REQ into elect[self] of every peer we can reach and have not
 * yet asked; SENT keeps the tally. */
static void ask_peers(struct node *n, const struct elect_req *req, uint32_t *sent)
{
	for (int k = 0; k < n->cfg.nnodes; k++) {
		if (k == n->self || !node_votes(n, k) || (*sent >> k & 1) || reach(n, k))
			continue;
		n->ops->write(n->tp, k, offsetof(struct region_ctl, elect[n->self]), req,
			      sizeof(*req));
		n->ops->ring(n->tp, k);
		*sent |= 1u << k;
	}
	n->ops->poll(n->tp);
}

static uint64_t vote_deadline(struct node *n)
{
	return now_ns() + (uint64_t)(2 * n->cfg.heartbeat_ms + 50) * 1000000ULL;
}

/* The pre-vote round: 1 when a majority would vote for REQ's view. */
static int canvass(struct node *n, struct elect_req req)
{
	uint64_t deadline = vote_deadline(n);
	uint32_t sent = 0, answered = 0;
	int yes = 1, no = 0;

	req.probe = realtime_ns() | 1;
	while (now_ns() < deadline && !__atomic_load_n(&n->stopping, __ATOMIC_RELAXED)) {
		uint32_t seen = n->ops->bell(n->tp);

		ask_peers(n, &req, &sent);
		for (int k = 0; k < n->cfg.nnodes; k++) {
			struct probe_answer *a = &n->ctl->probe[k];

			if (k == n->self || !node_votes(n, k) || (answered >> k & 1) ||
			    load64(&a->round) != req.probe)
				continue;
			uint64_t ok = load64(&a->ok), seen_k = load64(&a->seen);
			if (load64(&a->round) != req.probe)
				continue;	/* being rewritten */
			answered |= 1u << k;
			n->elect.max_seen = max_u64(n->elect.max_seen, seen_k);
			if (ok)
				yes++;
			else
				no++;
		}
		if (yes >= n->quorum)
			return 1;
		if (node_voters(n) - no < n->quorum)
			break;
		if (election_answer(n, 1) || someone_leads(n, req.view))
			return 0;
		n->ops->wait(n->tp, seen, 1000);
	}
	pr_info("pre-vote for view %llu: %d of %d would vote for us; not standing",
		(unsigned long long)req.view, yes, node_voters(n));
	return 0;
}

int election_stand(struct node *n)
{
	uint64_t view = known_view(n) + 1, lv, li, end, deadline;
	uint32_t sent = 0, counted = 0, refused = 0;
	int votes = 1;

	node_log_end(n, &lv, &li, &end);
	struct elect_req req = { lv, li, 0, view };
	if (!canvass(n, req))
		return 0;
	fence_old_leader(n, __atomic_load_n(&n->leader, __ATOMIC_ACQUIRE), -1);
	n->ctl->dur.voted_view = view;
	n->ctl->dur.voted_for = (uint64_t)n->self;
	node_save_durable(n);
	__atomic_store_n(&n->connected, 0, __ATOMIC_RELEASE);
	node_set_role(n, ROLE_CANDIDATE, -1, __atomic_load_n(&n->view, __ATOMIC_ACQUIRE));
	pr_info("standing for view %llu (log ends at %llu.%llu)", (unsigned long long)view,
		(unsigned long long)lv, (unsigned long long)li);

	deadline = vote_deadline(n);
	while (now_ns() < deadline && !__atomic_load_n(&n->stopping, __ATOMIC_RELAXED)) {
		uint32_t seen = n->ops->bell(n->tp);

		ask_peers(n, &req, &sent);
		for (int k = 0; k < n->cfg.nnodes; k++) {
			struct vote_slot *v = &n->ctl->vote[k];
			uint64_t g = load64(&v->granted);

			uint64_t seen_k = load64(&v->seen);

			n->elect.max_seen = max_u64(n->elect.max_seen, seen_k);
			if (k == n->self || !node_votes(n, k) || (counted >> k & 1))
				continue;
			if (g == view) {
				counted |= 1u << k;
				votes++;
			} else if (!g && seen_k >= view) {
				refused |= 1u << k;	/* it answered this request: no */
			}
		}
		if (votes >= n->quorum) {
			n->ctl->dur.view = view;
			node_save_durable(n);
			__atomic_store_n(&n->serving, 0, __ATOMIC_RELEASE);
			node_set_role(n, ROLE_LEADER, n->self, view);
			status_add(&n->status->elections_won, 1);
			pr_info("won view %llu with %d of %d votes", (unsigned long long)view, votes,
				node_voters(n));
			return 1;
		}
		/* Too many said no: no point waiting for the deadline. */
		if (node_voters(n) - __builtin_popcount(refused) < n->quorum)
			break;
		/* Another candidate with a better log, or a leader already. */
		if (election_answer(n, 1) || someone_leads(n, view)) {
			status_add(&n->status->elections_lost, 1);
			return 0;
		}
		n->ops->wait(n->tp, seen, 1000);
	}
	status_add(&n->status->elections_lost, 1);
	pr_info("no majority for view %llu (%d vote%s)", (unsigned long long)view, votes,
		votes == 1 ? "" : "s");
	node_set_role(n, ROLE_BACKUP, -1, __atomic_load_n(&n->view, __ATOMIC_ACQUIRE));
	return 0;
}
