/* The cluster's membership in force on this node; see members.h. */
#define LOG_PREFIX "members: "
#include "coordinator/node/members.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "common/logger.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "common/sys.h"

int node_votes(const struct node *n, int k)
{
	return k >= 0 && k < APUS_MAX_NODES &&
	       (__atomic_load_n(&n->voters, __ATOMIC_ACQUIRE) >> k & 1);
}

int node_is_member(const struct node *n, int k)
{
	return k >= 0 && k < APUS_MAX_NODES &&
	       (__atomic_load_n(&n->members, __ATOMIC_ACQUIRE) >> k & 1);
}

int node_voters(const struct node *n)
{
	return __builtin_popcount(__atomic_load_n(&n->voters, __ATOMIC_ACQUIRE));
}

/* The masks and the quorum from n->cfg. */
static void set_masks(struct node *n)
{
	uint32_t voters = 0, members = 0;

	for (int i = 0; i < n->cfg.nnodes; i++) {
		if (config_is_voter(&n->cfg, i))
			voters |= 1u << i;
		if (config_is_member(&n->cfg, i))
			members |= 1u << i;
	}
	__atomic_store_n(&n->voters, voters, __ATOMIC_RELEASE);
	__atomic_store_n(&n->members, members, __ATOMIC_RELEASE);
	__atomic_store_n(&n->quorum, __builtin_popcount(voters) / 2 + 1, __ATOMIC_RELEASE);
}

/* One line naming each member, for the log. */
static void describe(const struct apus_config *c, char *out, size_t cap)
{
	size_t o = 0;

	out[0] = '\0';
	for (int i = 0; i < c->nnodes && o < cap; i++) {
		if (!config_is_member(c, i))
			continue;
		int k = snprintf(out + o, cap - o, "%snode %d %s at %s:%d", o ? ", " : "", i,
				 member_role_name(c->nodes[i].member), c->nodes[i].address,
				 c->nodes[i].app_port);
		if (k < 0)
			break;
		o += (size_t)k;
	}
}

int members_load(struct node *n, char *err, size_t errlen)
{
	char *text = malloc(MEMBERS_TEXT_MAX), *mine = malloc(MEMBERS_TEXT_MAX), why[256];
	size_t len;
	uint64_t idx;
	int rc = 0;

	if (!text || !mine) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
		goto out;
	}
	n->status->members_idx = 0;
	if (members_file_read(&n->cfg, n->self, text, MEMBERS_TEXT_MAX, &len, &idx) == 0) {
		int had = config_format_members(&n->cfg, mine, MEMBERS_TEXT_MAX);

		if (config_parse_members(&n->cfg, text, len, why, sizeof(why))) {
			snprintf(err, errlen, "%s/%s: %s", n->cfg.nodes[n->self].data_dir,
				 MEMBERS_FILE, why);
			rc = -1;
			goto out;
		}
		int now = config_format_members(&n->cfg, text, MEMBERS_TEXT_MAX);
		if (had != now || memcmp(mine, text, (size_t)now)) {
			describe(&n->cfg, why, sizeof(why));
			pr_warn("%s is not the membership agreed at entry %llu: following the "
				"agreed one (%s)", n->cfg.path, (unsigned long long)idx, why);
		}
		n->status->members_idx = idx;
	}
	set_masks(n);
out:
	free(text);
	free(mine);
	return rc;
}

void members_adopt(struct node *n, const char *text, size_t len, uint64_t idx)
{
	char why[512];
	uint32_t before = __atomic_load_n(&n->members, __ATOMIC_ACQUIRE);

	if (idx <= n->status->members_idx)
		return;	/* in force already: executed again after a restart */
	if (config_parse_members(&n->cfg, text, len, why, sizeof(why))) {
		pr_err("entry %llu: the membership in it is not valid here (%s); keeping the "
		       "one of entry %llu", (unsigned long long)idx, why,
		       (unsigned long long)n->status->members_idx);
		return;
	}
	int rc = members_file_write(&n->cfg, n->self, text, len, idx);
	if (rc)
		pr_err("cannot write %s in %s: %s (the next start follows an older "
		       "membership until it executes this entry again)", MEMBERS_FILE,
		       n->cfg.nodes[n->self].data_dir, strerror(-rc));
	set_masks(n);
	store64(&n->status->members_idx, idx);
	describe(&n->cfg, why, sizeof(why));
	pr_info("membership of entry %llu in force: %s (majority %d of %d voters)",
		(unsigned long long)idx, why, __atomic_load_n(&n->quorum, __ATOMIC_RELAXED),
		node_voters(n));
	/* A node no member any more gets nothing from us again. */
	uint32_t gone = before & ~__atomic_load_n(&n->members, __ATOMIC_ACQUIRE);
	for (int k = 0; k < APUS_MAX_NODES; k++)
		if (gone >> k & 1 && k != n->self) {
			__atomic_and_fetch(&n->connected, ~(1u << k), __ATOMIC_RELEASE);
			n->lead.peer_inc[k] = 0;
			store64(&n->ctl->peer[k].acked, 0);
		}
	if (!node_is_member(n, n->self)) {
		pr_warn("this node was removed from the cluster by entry %llu: it replicates "
			"nothing any more and its server refuses clients; stop it (apus stop --node %d)",
			(unsigned long long)idx, n->self);
		__atomic_store_n(&n->serving, 0, __ATOMIC_RELEASE);
		node_set_role(n, ROLE_REMOVED, -1, __atomic_load_n(&n->view, __ATOMIC_ACQUIRE));
	}
}

/* The answer to request SEQ. */
static void answer(struct node *n, uint64_t seq, uint64_t idx, int err, const char *why)
{
	struct member_words *w = &region_mail(n->ctl)->member;

	store64(&w->idx, idx);
	__atomic_store_n(&w->err, (int64_t)err, __ATOMIC_RELEASE);
	snprintf(w->why, sizeof(w->why), "%s", why ? why : "");
	store64(&w->answered, seq);
	if (err)
		pr_warn("membership change %llu refused: %s", (unsigned long long)seq, why);
}

/* A learner this close to the commit index votes next. */
#define CAUGHT_UP_ENTRIES 1000

/* The step the cluster takes by itself (no change pending, serving): a
 * learner that caught up becomes a voter; a voter that replaces a node
 * still a member has it removed.  Returns the node whose role changes
 * (its new role in *ROLE), or -1.  Decided on our own membership: the
 * whole new one is built only when there is a step to propose. */
static int next_step(struct node *n, int *role, char *what, size_t whatlen)
{
	uint64_t commit = __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE);
	uint32_t synced = __atomic_load_n(&n->connected, __ATOMIC_ACQUIRE);

	for (int k = 0; k < n->cfg.nnodes; k++) {
		uint64_t applied = load64(&n->ctl->peer[k].applied);

		if (k == n->self || n->cfg.nodes[k].member != MEMBER_LEARNER || !(synced >> k & 1) ||
		    applied + CAUGHT_UP_ENTRIES < commit)
			continue;
		*role = MEMBER_VOTER;
		snprintf(what, whatlen, "learner node %d caught up (entry %llu of %llu): it votes",
			 k, (unsigned long long)applied, (unsigned long long)commit);
		return k;
	}
	for (int k = 0; k < n->cfg.nnodes; k++) {
		int r = n->cfg.nodes[k].replaces;

		if (!config_is_voter(&n->cfg, k) || !config_is_member(&n->cfg, r))
			continue;
		*role = MEMBER_REMOVED;
		snprintf(what, whatlen, "node %d votes in node %d's place: node %d is removed", k, r,
			 r);
		return r;
	}
	return -1;
}

/* Proposes WANT (one step from ours) as an entry; 0 with *IDX, or -errno
 * with WHY set. */
static int propose(struct node *n, const struct apus_config *want, uint64_t *idx, char *why,
		   size_t whylen)
{
	char *text = malloc(MEMBERS_TEXT_MAX);
	int rc;

	if (!text) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	rc = config_format_members(want, text, MEMBERS_TEXT_MAX);
	if (rc < 0 || (uint32_t)rc > n->cfg.max_entry) {
		snprintf(why, whylen, "the membership does not fit in one entry (max_entry)");
		free(text);
		return -E2BIG;
	}
	rc = leader_propose_members(n, text, (size_t)rc, idx);
	if (rc) {
		snprintf(why, whylen, "%s", rc == -EAGAIN ? "the log is full; ask again" : strerror(-rc));
		free(text);
		return rc;
	}
	n->lead.member_pending = *idx;
	n->lead.member_pending_text = text;
	n->lead.member_pending_len = strlen(text);
	store64(&n->status->member_pending, *idx);
	describe(want, why, whylen);
	pr_info("proposed membership entry %llu: %s", (unsigned long long)*idx, why);
	return 0;
}

/* The CLI's request SEQ: a membership one step from ours, proposed. */
static void handle_request(struct node *n, uint64_t seq)
{
	struct apus_config *want = malloc(sizeof(*want));
	char *text = malloc(MEMBERS_TEXT_MAX), path[PATH_MAX], why[256];
	size_t len = 0;
	uint64_t idx;
	FILE *f = NULL;
	int rc;

	if (!want || !text) {
		answer(n, seq, 0, -ENOMEM, "out of memory");
		goto out;
	}
	if (!__atomic_load_n(&n->serving, __ATOMIC_ACQUIRE)) {
		answer(n, seq, 0, -EAGAIN, "the leader is still catching up; ask again");
		goto out;
	}
	if (n->lead.member_pending) {
		snprintf(why, sizeof(why), "another change (entry %llu) is not in force yet",
			 (unsigned long long)n->lead.member_pending);
		answer(n, seq, 0, -EBUSY, why);
		goto out;
	}
	if (!config_node_path(&n->cfg, n->self, MEMBERS_WANT_FILE, path, sizeof(path)))
		f = sys.fopen(path, "re");
	if (f) {
		len = fread(text, 1, MEMBERS_TEXT_MAX - 1, f);
		fclose(f);
	}
	if (!f || !len || len == MEMBERS_TEXT_MAX - 1) {
		answer(n, seq, 0, -EINVAL, "cannot read the wanted membership (apus.members.want)");
		goto out;
	}
	*want = n->cfg;
	if (config_parse_members(want, text, len, why, sizeof(why)) ||
	    members_step_check(&n->cfg, want, why, sizeof(why))) {
		answer(n, seq, 0, -EINVAL, why);
		goto out;
	}
	if (members_steps_left(&n->cfg, why, sizeof(why)) && !members_aborts(&n->cfg, want)) {
		answer(n, seq, 0, -EBUSY, why);
		goto out;
	}
	rc = propose(n, want, &idx, why, sizeof(why));
	answer(n, seq, rc ? 0 : idx, rc, rc ? why : NULL);
out:
	free(want);
	free(text);
}

void members_poll(struct node *n)
{
	uint64_t seq = load64(&region_mail(n->ctl)->member.want_seq);

	if (n->lead.member_pending &&
	    __atomic_load_n(&n->commit, __ATOMIC_ACQUIRE) >= n->lead.member_pending) {
		members_adopt(n, n->lead.member_pending_text, n->lead.member_pending_len,
			      n->lead.member_pending);
		free(n->lead.member_pending_text);
		n->lead.member_pending_text = NULL;
		n->lead.member_pending = 0;
		store64(&n->status->member_pending, 0);
	}
	if (node_role(n) != ROLE_LEADER)
		return;
	if (seq && seq != load64(&region_mail(n->ctl)->member.answered)) {
		handle_request(n, seq);
		return;
	}
	if (n->lead.member_pending || !__atomic_load_n(&n->serving, __ATOMIC_ACQUIRE))
		return;
	char what[160], why[256];
	int role, k = next_step(n, &role, what, sizeof(what));
	struct apus_config *want;
	uint64_t idx;

	if (k < 0 || !(want = malloc(sizeof(*want))))
		return;
	*want = n->cfg;
	want->nodes[k].member = role;
	pr_info("%s", what);
	if (propose(n, want, &idx, why, sizeof(why)))
		pr_warn("cannot propose it yet: %s", why);
	free(want);
}
