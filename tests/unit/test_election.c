/* Elections (coordinator/node/election.c) between three nodes of this process:
 * real regions (in /dev/shm, with their durable copy apus.wal: fsync =
 * always), the real shm transport, no role threads: the test plays the
 * role thread of each node, and writes a candidate's requests into a
 * voter's region through the candidate's transport, as ask_peers() does.
 *
 * Vote rules (election_answer): a vote goes only to a candidate whose log
 * is at least as up to date (last view, then last index); at most one vote
 * per view; a request answered is not answered again; a node with a live
 * leader refuses; a refused view is remembered as seen.  The vote is in
 * the durable copy before it is written to the candidate, and a voter
 * restarted (its memory region kept, or lost and rebuilt from apus.wal)
 * does not vote again in that view.  The voter fences its old leader.
 * Pre-vote: an answer says what a vote would be and changes nothing
 * durable; election_stand() does not stand when a majority would refuse
 * (leader alive, log behind, a newer view known), stands for the view
 * after the newest any peer reported, loses when the votes are refused
 * after the pre-vote (its vote for itself durable: rebooted, it votes for
 * nobody else in that view), and wins with a majority.  Skips (77) where
 * regions cannot live in memory (no apus.wal to look at). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/logger.h"
#include "coordinator/node/members.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "tests/unit/testdir.h"
#include "tests/unit/unit.h"

#define NN 3

static char dir[] = "/tmp/apus-election-XXXXXX";
static struct apus_config cfg;
/* Static: the nodes stay reachable for the leak check. */
static struct node nodes[NN];
static struct node *N[NN];
static int passed;

/* --- The voter's sends, watched: its durable copy when a vote leaves --- */

static struct transport_ops spy_ops;
static uint64_t spy_granted, spy_durable_voted;	/* last grant sent, and apus.wal then */
static int spy_grants;

/* The durable words in node K's apus.wal (not its memory region). */
static struct durable wal_durable(int k)
{
	char path[PATH_MAX];
	struct durable d;
	int fd;

	CHECK(config_node_path(&cfg, k, WAL_FILE, path, sizeof(path)) == 0, "wal path");
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "%s: %s", path, strerror(errno));
	CHECK(pread(fd, &d, sizeof(d), offsetof(struct region_ctl, dur)) == sizeof(d), "read %s",
	      path);
	close(fd);
	return d;
}

/* Node k told a candidate yes in a pre-vote (in k's own thread). */
static int said_yes[NN];

static int spy_write(struct transport *t, int peer, uint64_t off, const void *buf, size_t len)
{
	for (int k = 0; k < NN; k++) {
		const struct vote_slot *v = buf;
		const struct probe_answer *a = buf;

		if (N[k] && N[k]->tp == t && off == offsetof(struct region_ctl, probe[k]) &&
		    len == sizeof(*a) && a->ok)
			__atomic_store_n(&said_yes[k], 1, __ATOMIC_RELAXED);

		if (N[k] && N[k]->tp == t && off == offsetof(struct region_ctl, vote[k]) &&
		    len == sizeof(*v) && v->granted) {
			/* Atomics: the voters of election_stand() send at once. */
			__atomic_store_n(&spy_granted, v->granted, __ATOMIC_RELAXED);
			__atomic_store_n(&spy_durable_voted, wal_durable(k).voted_view,
					 __ATOMIC_RELAXED);
			__atomic_add_fetch(&spy_grants, 1, __ATOMIC_RELAXED);
		}
	}
	return transport_shm_ops.write(t, peer, off, buf, len);
}

/* --- Nodes without threads: node_start() up to its role thread --- */

static void node_open(int k)
{
	struct node *n = &nodes[k];
	struct region_origin origin;
	void *base;
	int rc;

	memset(n, 0, sizeof(*n));
	n->cfg = cfg;
	n->self = k;
	n->ops = &spy_ops;
	n->log_size = cfg.log_size;
	n->exec.idx = 1;
	n->wal.fd = -1;
	pthread_mutex_init(&n->lead.lock, NULL);
	CHECK((rc = region_create(&n->cfg, k, &base, &n->region_fd, &origin)) == 0, "region %d: %d",
	      k, rc);
	n->region = base;
	n->region_size = region_size_for(n->log_size);
	n->ctl = base;
	n->status = region_status(n->ctl);
	n->log = n->region + REGION_CTL_SIZE;
	/* Voters and the quorum, as node_start has them. */
	char err[256];
	CHECK(members_load(n, err, sizeof(err)) == 0, "members %d: %s", k, err);
	CHECK(n->quorum == config_quorum(&cfg), "quorum %d", n->quorum);
	CHECK(wal_open(&n->wal, &n->cfg, k, n->region, &origin) == 0, "wal %d", k);
	if (n->wal.fd < 0) {
		/* The durable copy is what the vote is checked in. */
		printf("no memory file system for the regions (%s): no apus.wal\n", cfg.region_dir);
		passed = 1;
		exit(UNIT_SKIP);
	}
	CHECK(n->ops->open(&n->cfg, k, n->region, n->region_size, &n->tp) == 0, "transport %d", k);
	n->view = n->ctl->dur.view;
	n->leader = -1;
	n->role = ROLE_BACKUP;
	N[k] = n;
}

/* The node's process ends; with LOSE_MEMORY its memory region goes too
 * (a reboot): the next start rebuilds it from apus.wal. */
static void node_crash(int k, int lose_memory)
{
	struct node *n = N[k];
	char path[PATH_MAX];

	if (lose_memory)
		CHECK(region_backing_path(&cfg, k, path) == 0, "backing path");
	n->ops->close(n->tp);
	munmap(n->region, n->region_size);
	close(n->region_fd);
	close(n->wal.fd);
	N[k] = NULL;
	if (lose_memory)
		CHECK(unlink(path) == 0, "unlink %s", path);
}

/* Node K's log becomes COUNT entries of the views given (index 1 on). */
static void log_fill(int k, const uint64_t *views, int count)
{
	struct node *n = N[k];
	uint64_t pos = 0, lv, li, end;
	char byte = 'x';
	struct iovec iov = { &byte, 1 };

	memset(n->log, 0, n->log_size);
	for (int i = 0; i < count; i++) {
		struct entry_meta m = { .idx = (uint64_t)i + 1, .view = views[i], .type = ENTRY_RECV };

		entry_write(n->log + pos, &m, &iov, 1, 0, 1);
		pos += entry_size(1);
	}
	node_log_end(n, &lv, &li, &end);
	CHECK(li == (uint64_t)count && lv == (count ? views[count - 1] : 0),
	      "node %d's log ends at %llu.%llu", k, (unsigned long long)lv, (unsigned long long)li);
}

/* Node K knows view V (it followed it). */
static void set_view(int k, uint64_t v)
{
	N[k]->ctl->dur.view = v;
	N[k]->view = v;
	node_save_durable(N[k]);
}

/* Candidate C writes its request into voter V's region, as ask_peers() does. */
static void request(int c, int v, uint64_t last_view, uint64_t last_idx, uint64_t probe,
		    uint64_t view)
{
	struct node *n = N[c];
	struct elect_req req = { last_view, last_idx, probe, view };

	if (!n->ops->connected(n->tp, v) || n->ops->check(n->tp, v))
		CHECK(n->ops->connect(n->tp, v) == 0, "node %d cannot reach node %d", c, v);
	CHECK(n->ops->write(n->tp, v, offsetof(struct region_ctl, elect[c]), &req, sizeof(req)) == 0,
	      "request of %d to %d", c, v);
	n->ops->ring(n->tp, v);
}

/* What voter V answered candidate C (read in C's region); cleared after. */
static struct vote_slot vote_of(int c, int v)
{
	struct vote_slot s = N[c]->ctl->vote[v];

	memset(&N[c]->ctl->vote[v], 0, sizeof(s));
	return s;
}

static struct probe_answer probe_of(int c, int v)
{
	struct probe_answer a = N[c]->ctl->probe[v];

	memset(&N[c]->ctl->probe[v], 0, sizeof(a));
	return a;
}

static int same_durable(const struct durable *a, const struct durable *b)
{
	return a->view == b->view && a->voted_view == b->voted_view && a->voted_for == b->voted_for;
}

/* --- election_answer: the voter's rules --- */

static void vote_rules(void)
{
	const uint64_t vlog[] = { 1, 1, 2, 2, 2 };	/* node 1's log ends at 2.5 */
	struct vote_slot s;
	struct durable d0;

	log_fill(1, vlog, 5);
	set_view(1, 2);
	d0 = N[1]->ctl->dur;

	/* Same last view, shorter: refused, and the view is remembered. */
	request(0, 1, 2, 4, 0, 3);
	CHECK(election_pending(N[1]), "a request waits, not pending");
	CHECK(election_newer_request(N[1], 2) == 0, "a request for view 3 is newer than 2");
	CHECK(election_newer_request(N[1], 3) == -1, "a request for view 3 is not newer than 3");
	CHECK(election_answer(N[1], 1) == 0, "voted for a shorter log (2.4 against 2.5)");
	CHECK(!election_pending(N[1]), "an answered request still pending");
	s = vote_of(0, 1);
	CHECK(!s.granted && s.seen >= 2, "refusal: granted %llu seen %llu",
	      (unsigned long long)s.granted, (unsigned long long)s.seen);
	CHECK(N[1]->elect.max_seen == 3, "refused view 3 not remembered (max_seen %llu)",
	      (unsigned long long)N[1]->elect.max_seen);
	CHECK(same_durable(&N[1]->ctl->dur, &d0), "a refusal changed the durable words");

	/* An older last view, however long: refused. */
	request(0, 1, 1, 100, 0, 4);
	CHECK(election_answer(N[1], 1) == 0, "voted for a log of an older view (1.100 against 2.5)");
	CHECK(!vote_of(0, 1).granted, "granted");

	/* As up to date: granted, and on disk before it was sent. */
	spy_grants = 0;
	request(0, 1, 2, 5, 0, 5);
	CHECK(election_answer(N[1], 1) == 1, "refused an equal log (2.5)");
	s = vote_of(0, 1);
	CHECK(s.granted == 5, "vote slot says %llu", (unsigned long long)s.granted);
	CHECK(spy_grants == 1 && spy_granted == 5, "grants sent: %d", spy_grants);
	CHECK(spy_durable_voted == 5, "the vote for view 5 left while apus.wal said voted_view %llu",
	      (unsigned long long)spy_durable_voted);
	CHECK(N[1]->ctl->dur.voted_view == 5 && N[1]->ctl->dur.voted_for == 0 &&
	      N[1]->ctl->dur.view == 5, "durable words %llu/%llu/%llu",
	      (unsigned long long)N[1]->ctl->dur.voted_view,
	      (unsigned long long)N[1]->ctl->dur.voted_for, (unsigned long long)N[1]->ctl->dur.view);
	CHECK(node_role(N[1]) == ROLE_BACKUP && N[1]->view == 5 && N[1]->leader == -1,
	      "voter role %d view %llu leader %d", node_role(N[1]), (unsigned long long)N[1]->view,
	      N[1]->leader);

	/* One vote per view: node 2, as up to date, asks for view 5 too. */
	request(2, 1, 2, 5, 0, 5);
	CHECK(election_answer(N[1], 1) == 0, "a second vote in view 5");
	CHECK(!vote_of(2, 1).granted, "granted");
	CHECK(N[1]->ctl->dur.voted_for == 0, "voted_for changed to %llu",
	      (unsigned long long)N[1]->ctl->dur.voted_for);

	/* The same request again is not answered again. */
	request(0, 1, 2, 5, 0, 5);
	CHECK(!election_pending(N[1]), "an answered request pending again");
	CHECK(election_answer(N[1], 1) == 0, "answered twice");
	s = vote_of(0, 1);
	CHECK(!s.granted && !s.seen, "a second answer was sent");

	/* A newer last view beats a longer log. */
	request(2, 1, 6, 1, 0, 6);
	CHECK(election_answer(N[1], 1) == 1, "refused a log of a newer view (6.1 against 2.5)");
	CHECK(vote_of(2, 1).granted == 6 && spy_durable_voted == 6, "the vote for view 6");
	CHECK(N[1]->ctl->dur.voted_view == 6 && N[1]->ctl->dur.voted_for == 2, "durable words");

	/* With a live leader: refused, nothing durable changes. */
	d0 = N[1]->ctl->dur;
	request(0, 1, 9, 9, 0, 7);
	CHECK(election_answer(N[1], 0) == 0, "voted while its leader is alive");
	CHECK(!vote_of(0, 1).granted && same_durable(&N[1]->ctl->dur, &d0), "refusal");
	CHECK(N[1]->elect.max_seen == 7, "view 7 not remembered");
}

/* --- Pre-vote answers: what a vote would be, nothing more --- */

static void prevote_answers(void)
{
	const uint64_t vlog[] = { 1, 2, 2 };	/* node 1's log ends at 2.3 */
	struct durable d0, w0;
	struct probe_answer a;
	uint64_t answered0, seen0, view0;

	log_fill(1, vlog, 3);
	d0 = N[1]->ctl->dur;
	w0 = wal_durable(1);
	answered0 = N[1]->elect.answered[0];
	seen0 = N[1]->elect.max_seen;	/* 7 */
	view0 = N[1]->view;

	request(0, 1, 2, 3, 0x1001, 8);
	CHECK(election_pending(N[1]), "a pre-vote waits, not pending");
	CHECK(election_newer_request(N[1], 7) == -1, "a pre-vote for the next view is no request");
	CHECK(election_answer(N[1], 1) == 0, "a pre-vote granted a vote");
	a = probe_of(0, 1);
	CHECK(a.round == 0x1001 && a.ok && a.seen == 7, "pre-vote answer %llu/%llu/%llu",
	      (unsigned long long)a.round, (unsigned long long)a.ok, (unsigned long long)a.seen);
	CHECK(!vote_of(0, 1).granted, "a pre-vote wrote a vote");
	CHECK(!election_pending(N[1]), "an answered round still pending");
	/* The same round is answered once. */
	CHECK(election_answer(N[1], 1) == 0 && !probe_of(0, 1).round, "a round answered twice");

	/* Would refuse: a shorter log, an old view, a live leader. */
	request(0, 1, 2, 2, 0x1003, 8);
	election_answer(N[1], 1);
	a = probe_of(0, 1);
	CHECK(a.round == 0x1003 && !a.ok, "would vote for a shorter log");
	request(0, 1, 2, 3, 0x1005, 7);
	election_answer(N[1], 1);
	a = probe_of(0, 1);
	CHECK(a.round == 0x1005 && !a.ok, "would vote in view 7, seen already");
	request(0, 1, 2, 3, 0x1007, 8);
	election_answer(N[1], 0);
	a = probe_of(0, 1);
	CHECK(a.round == 0x1007 && !a.ok, "would vote with a live leader");
	/* A pre-vote past the next view tells a leader of view 6 its end. */
	request(0, 1, 2, 3, 0x1009, 8);
	CHECK(election_newer_request(N[1], 6) == 0, "a pre-vote for view 8 under leader of view 6");
	election_answer(N[1], 1);
	CHECK(probe_of(0, 1).ok, "pre-vote");

	CHECK(same_durable(&N[1]->ctl->dur, &d0), "a pre-vote changed the durable words");
	struct durable w1 = wal_durable(1);
	CHECK(same_durable(&w1, &w0), "a pre-vote changed apus.wal");
	CHECK(N[1]->elect.answered[0] == answered0 && N[1]->elect.max_seen == seen0 &&
		      N[1]->view == view0,
	      "a pre-vote changed what the voter knows");
}

/* --- A restarted voter never votes twice in a view --- */

static void restarted_voter(int lose_memory)
{
	uint64_t voted = N[1]->ctl->dur.voted_view;	/* 6, for node 2 */

	node_crash(1, lose_memory);
	node_open(1);
	CHECK(N[1]->ctl->dur.voted_view == voted && N[1]->ctl->dur.voted_for == 2,
	      "restart%s: voted %llu for %llu", lose_memory ? " from apus.wal" : "",
	      (unsigned long long)N[1]->ctl->dur.voted_view,
	      (unsigned long long)N[1]->ctl->dur.voted_for);
	/* Any log is as up to date as an empty one: only the vote can refuse. */
	log_fill(1, NULL, 0);
	request(0, 1, 9, 9, 0, voted);
	CHECK(election_answer(N[1], 1) == 0, "restart%s: voted again in view %llu",
	      lose_memory ? " from apus.wal" : "", (unsigned long long)voted);
	CHECK(!vote_of(0, 1).granted && N[1]->ctl->dur.voted_for == 2, "second vote");
}

/* The voter fences the leader it leaves before it votes; not a process of
 * that node that leads no more (a deposed leader that re-executed as a
 * backup before the vote: fenced, it would stay out for good). */
static void fences_old_leader(void)
{
	uint64_t inc2 = N[2]->ctl->incarnation, v = N[1]->ctl->dur.voted_view + 10;

	N[2]->status->role = ROLE_BACKUP;
	N[1]->leader = 2;
	request(0, 1, 9, 9, 0, v);
	CHECK(election_answer(N[1], 1) == 1, "vote for node 0");
	CHECK(N[1]->ctl->fenced_inc[2] == 0, "a backup was fenced as the old leader");
	N[2]->status->role = ROLE_LEADER;
	N[1]->leader = 2;
	v += 10;
	request(0, 1, 9, 9, 0, v);
	CHECK(election_answer(N[1], 1) == 1, "vote for node 0");
	CHECK(N[1]->ctl->fenced_inc[2] == inc2, "the old leader was not fenced (%llu, want %llu)",
	      (unsigned long long)N[1]->ctl->fenced_inc[2], (unsigned long long)inc2);
	CHECK(vote_of(0, 1).granted == v, "vote");
}

/* --- election_stand, with the voters' role threads answering --- */

static int voter_may_vote[NN], stop;
/* Once it said yes to a pre-vote, the voter hears its leader again: the
 * flag is set while it sends the yes, so its next answer (the request
 * comes only after that yes) is a refusal. */
static int leader_back[NN];

static void *voter_main(void *arg)
{
	struct node *n = arg;

	__atomic_store_n(&said_yes[n->self], 0, __ATOMIC_RELAXED);
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		uint32_t seen = n->ops->bell(n->tp);
		int back = leader_back[n->self] &&
			   __atomic_load_n(&said_yes[n->self], __ATOMIC_RELAXED);
		int may = voter_may_vote[n->self] && !back;

		election_answer(n, may);
		n->ops->wait(n->tp, seen, 1000);
	}
	return NULL;
}

/* Node 0 stands while nodes 1 and 2 answer; returns what it returned. */
static int stand(int may1, int may2)
{
	pthread_t th[NN];
	int won;

	voter_may_vote[1] = may1;
	voter_may_vote[2] = may2;
	__atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
	for (int k = 1; k < NN; k++)
		CHECK(pthread_create(&th[k], NULL, voter_main, N[k]) == 0, "thread");
	won = election_stand(N[0]);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int k = 1; k < NN; k++) {
		N[k]->ops->wake(N[k]->tp);
		pthread_join(th[k], NULL);
	}
	return won;
}

struct all_durable {
	struct durable mem[NN], wal[NN];
};

static void all_durable(struct all_durable *a)
{
	for (int k = 0; k < NN; k++) {
		a->mem[k] = N[k]->ctl->dur;
		a->wal[k] = wal_durable(k);
	}
}

/* A failed pre-vote: nobody's durable words change, the candidate does
 * not become one and counts no lost election; returns its elect.max_seen. */
static uint64_t no_stand(int may1, int may2, const char *why)
{
	struct all_durable before, after;
	uint64_t lost = N[0]->status->elections_lost, view = N[0]->view;
	uint64_t answered[NN] = { 0, N[1]->elect.answered[0], N[2]->elect.answered[0] };

	all_durable(&before);
	CHECK(stand(may1, may2) == 0, "stood although %s", why);
	all_durable(&after);
	for (int k = 0; k < NN; k++) {
		CHECK(same_durable(&before.mem[k], &after.mem[k]), "%s: node %d's durable words changed",
		      why, k);
		CHECK(same_durable(&before.wal[k], &after.wal[k]), "%s: node %d's apus.wal changed", why,
		      k);
		if (k)
			CHECK(N[k]->elect.answered[0] == answered[k],
			      "%s: node %d answered a real request", why, k);
	}
	CHECK(node_role(N[0]) == ROLE_BACKUP && N[0]->view == view, "%s: role %d view %llu", why,
	      node_role(N[0]), (unsigned long long)N[0]->view);
	CHECK(N[0]->status->elections_lost == lost, "%s: a pre-vote counted as a lost election",
	      why);
	return N[0]->elect.max_seen;
}

static void standing(void)
{
	const uint64_t good[] = { 1, 2, 2, 2 }, short_log[] = { 1, 2 }, newer[] = { 1, 3 };
	uint64_t won0, lost0;

	/* Fresh nodes: all at view 2, no votes. */
	for (int k = 0; k < NN; k++) {
		node_crash(k, 1);
		node_open(k);
		memset(&N[k]->ctl->dur, 0, sizeof(N[k]->ctl->dur));
		set_view(k, 2);
	}
	log_fill(0, good, 4);
	log_fill(1, short_log, 2);
	log_fill(2, good, 3);

	/* Their leader is alive for both voters. */
	no_stand(0, 0, "the leader is alive");
	/* A longer log of an older view does not win: theirs end in view 3. */
	log_fill(1, newer, 2);
	log_fill(2, newer, 2);
	no_stand(1, 1, "a majority's logs are newer");
	log_fill(1, short_log, 2);
	log_fill(2, good, 3);

	/* Node 1 knows view 7: the pre-vote for view 3 fails, node 0 learns
	 * of 7, and next time stands for 8. */
	set_view(1, 7);
	set_view(2, 7);
	CHECK(no_stand(1, 1, "a majority knows a newer view") == 7, "view 7 not learnt");

	/* The pre-vote passes (node 1 says yes: a majority with node 0),
	 * then node 1 hears its leader again and refuses like node 2: node 0
	 * stood (its own vote for 8 is durable) and lost. */
	lost0 = N[0]->status->elections_lost;
	leader_back[1] = 1;
	CHECK(stand(1, 0) == 0, "won without a vote");
	leader_back[1] = 0;
	CHECK(node_role(N[0]) == ROLE_BACKUP && N[0]->view == 2, "loser: role %d view %llu",
	      node_role(N[0]), (unsigned long long)N[0]->view);
	CHECK(N[0]->status->elections_lost == lost0 + 1, "the lost election was not counted");
	CHECK(N[0]->ctl->dur.voted_view == 8 && N[0]->ctl->dur.voted_for == 0 &&
	      wal_durable(0).voted_view == 8, "the candidate's vote for itself");
	for (int k = 1; k < NN; k++)
		CHECK(!N[k]->ctl->dur.voted_view, "node %d voted", k);
	/* Rebooted, it still will not vote for another in view 8 (it knows
	 * of view 8 only by its vote for itself). */
	node_crash(0, 1);
	node_open(0);
	log_fill(0, good, 4);
	request(2, 0, 9, 9, 0, 8);
	CHECK(election_answer(N[0], 1) == 0, "a candidate voted for another in its own view");
	CHECK(!vote_of(2, 0).granted && N[0]->ctl->dur.voted_for == 0, "second vote");

	/* Willing voters: node 0 wins view 9. */
	won0 = N[0]->status->elections_won;
	CHECK(stand(1, 1) == 1, "lost with the best log and willing voters");
	CHECK(node_role(N[0]) == ROLE_LEADER && N[0]->leader == 0 && N[0]->view == 9,
	      "winner: role %d leader %d view %llu", node_role(N[0]), N[0]->leader,
	      (unsigned long long)N[0]->view);
	CHECK(N[0]->ctl->dur.view == 9 && N[0]->ctl->dur.voted_view == 9 &&
	      N[0]->ctl->dur.voted_for == 0, "the winner's durable words");
	CHECK(wal_durable(0).voted_view == 9, "the winner's own vote is not on disk");
	CHECK(N[0]->status->elections_won == won0 + 1, "elections_won");
	int votes = 0;
	for (int k = 1; k < NN; k++)
		if (N[k]->ctl->dur.voted_view == 9) {
			CHECK(N[k]->ctl->dur.voted_for == 0 && wal_durable(k).voted_view == 9,
			      "node %d's vote", k);
			votes++;
		}
	CHECK(votes >= 1, "won without a vote");
}

/* Node 2 a learner (members.h), in force on every node: it grants no
 * vote, and a candidate counts none of its votes (node 0 with node 2
 * willing and node 1 not does not win; with node 1 it does). */
static void learners(void)
{
	const uint64_t good[] = { 1, 2, 2, 2 };
	static struct apus_config c;
	static char text[MEMBERS_TEXT_MAX];

	for (int k = 0; k < NN; k++) {
		node_crash(k, 1);
		node_open(k);
		memset(&N[k]->ctl->dur, 0, sizeof(N[k]->ctl->dur));
		set_view(k, 2);
		log_fill(k, good, k ? 3 : 4);
	}
	c = cfg;
	c.nodes[2].member = MEMBER_LEARNER;
	int len = config_format_members(&c, text, sizeof(text));
	CHECK(len > 0, "format");
	for (int k = 0; k < NN; k++)
		members_adopt(N[k], text, (size_t)len, 5);
	CHECK(node_voters(N[0]) == 2 && N[0]->quorum == 2 && !node_votes(N[0], 2) &&
		      node_is_member(N[0], 2),
	      "voters %d quorum %d", node_voters(N[0]), N[0]->quorum);
	request(0, 2, 2, 4, 0, 3);
	CHECK(election_answer(N[2], 1) == 0 && !vote_of(0, 2).granted && !N[2]->ctl->dur.voted_view,
	      "a learner voted");
	CHECK(stand(0, 1) == 0, "won with a learner's vote");
	CHECK(stand(1, 1) == 1, "lost with a voter's vote");
	CHECK(N[2]->ctl->dur.voted_view == 0, "the learner voted");
	/* The next test's nodes are voters again (their regions and files
	 * are made anew). */
	for (int k = 0; k < NN; k++) {
		char path[PATH_MAX];
		CHECK(config_node_path(&cfg, k, MEMBERS_FILE, path, sizeof(path)) == 0, "path");
		unlink(path);
	}
}

/* Also after a failed check: the regions live in /dev/shm. */
static void cleanup(void)
{
	char cmd[128];

	if (!passed) {
		snprintf(cmd, sizeof(cmd), "tail -n 20 %s/log >&2", dir);
		if (system(cmd))
			fprintf(stderr, "no log\n");
	}
	testdir_remove(dir);
}

int main(void)
{
	char path[PATH_MAX], conf[2048];
	FILE *f;

	CHECK(mkdtemp(dir), "mkdtemp");
	atexit(cleanup);
	snprintf(path, sizeof(path), "%s/log", dir);
	setenv("APUS_LOG_FILE", path, 1);
	logger_init("test");
	for (int k = 0; k < NN; k++) {
		snprintf(path, sizeof(path), "%s/n%d", dir, k);
		CHECK(mkdir(path, 0700) == 0, "%s", path);
	}
	snprintf(conf, sizeof(conf),
		 "cluster = unit\nlog_size = 64K\nmax_entry = 4K\ntransport = shm\nfsync = always\n"
		 "heartbeat_ms = 1000\napp_cmd = true\n"
		 "[node 0]\napp_port = 1\npeer_port = 2\ndata_dir = n0\n"
		 "[node 1]\napp_port = 3\npeer_port = 4\ndata_dir = n1\n"
		 "[node 2]\napp_port = 5\npeer_port = 6\ndata_dir = n2\n");
	snprintf(path, sizeof(path), "%s/c.conf", dir);
	f = fopen(path, "w");
	CHECK(f && fputs(conf, f) >= 0 && fclose(f) == 0, "%s", path);
	CHECK(config_load(path, &cfg, conf, sizeof(conf)) == 0, "%s", conf);
	spy_ops = transport_shm_ops;
	spy_ops.write = spy_write;
	for (int k = 0; k < NN; k++)
		node_open(k);

	vote_rules();
	prevote_answers();
	restarted_voter(0);
	restarted_voter(1);
	fences_old_leader();
	standing();
	learners();

	for (int k = 0; k < NN; k++)
		N[k]->ops->close(N[k]->tp);
	passed = 1;
	printf("ok\n");
	return 0;
}
