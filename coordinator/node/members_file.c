/* The membership's files and the one-step rule; see members.h.  No node
 * state here: the CLI uses it too. */
#include "coordinator/node/members.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/sys.h"

int members_file_read(const struct apus_config *cfg, int node, char *out, size_t outlen,
		      size_t *len, uint64_t *idx)
{
	char path[PATH_MAX];
	unsigned long long at = 0;
	size_t got;
	FILE *f;

	if (config_node_path(cfg, node, MEMBERS_FILE, path, sizeof(path)))
		return -1;
	f = sys.fopen(path, "re");
	if (!f)
		return -1;
	got = fread(out, 1, outlen - 1, f);
	fclose(f);
	out[got] = '\0';
	if (got == outlen - 1 || sscanf(out, "# membership agreed at entry %llu", &at) != 1)
		return -1;
	*len = got;
	*idx = at;
	return 0;
}

/* apus.members := TEXT of entry IDX, atomically and durably. */
int members_file_write(const struct apus_config *cfg, int node, const char *text, size_t len,
		       uint64_t idx)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	int rc = 0;
	FILE *f;

	if (config_node_path(cfg, node, MEMBERS_FILE, path, sizeof(path)))
		return -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = sys.fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "# membership agreed at entry %llu (written by apus; the config file's "
		   "[node N] sections give way to it)\n", (unsigned long long)idx);
	if (fwrite(text, 1, len, f) != len || fflush(f) || fsync(fileno(f)))
		rc = -errno;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (!rc) {
		int d = sys.open(cfg->nodes[node].data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d >= 0) {
			fsync(d);
			sys.close(d);
		}
	}
	return rc;
}

int members_step_check(const struct apus_config *a, const struct apus_config *b, char *why,
		       size_t whylen)
{
	int changed = -1, changes = 0;

	if (b->nnodes < a->nnodes) {
		snprintf(why, whylen, "node %d is missing (a removed node keeps its section, "
				      "member = removed)", b->nnodes);
		return -1;
	}
	for (int i = 0; i < b->nnodes; i++) {
		const struct node_conf *x = &b->nodes[i];

		if (i >= a->nnodes) {
			if (x->member != MEMBER_LEARNER) {
				snprintf(why, whylen, "new node %d must come in as a learner", i);
				return -1;
			}
			changed = i, changes++;
			continue;
		}
		const struct node_conf *o = &a->nodes[i];
		if (strcmp(o->address, x->address) || o->app_port != x->app_port ||
		    o->peer_port != x->peer_port || o->guard_port != x->guard_port ||
		    strcmp(o->data_dir, x->data_dir) || strcmp(o->netns, x->netns)) {
			snprintf(why, whylen, "node %d's place changed: a node moves by replace, "
					      "under a new id", i);
			return -1;
		}
		if (o->replaces != x->replaces) {
			snprintf(why, whylen, "node %d's replaces changed", i);
			return -1;
		}
		if (o->member == x->member)
			continue;
		if (o->member == MEMBER_REMOVED ||
		    (o->member == MEMBER_VOTER && x->member == MEMBER_LEARNER)) {
			snprintf(why, whylen, "node %d cannot go from %s to %s", i,
				 member_role_name(o->member), member_role_name(x->member));
			return -1;
		}
		changed = i, changes++;
	}
	if (changes != 1) {
		snprintf(why, whylen, "a change moves exactly one node one step (%d asked)", changes);
		return -1;
	}
	(void)changed;
	return 0;
}


/* Whether the membership has steps the cluster takes by itself (a learner
 * to promote, a replaced node to remove): a change in progress.  WHY says
 * which. */
int members_steps_left(const struct apus_config *c, char *why, size_t whylen)
{
	for (int k = 0; k < c->nnodes; k++) {
		int r = c->nodes[k].replaces;

		if (c->nodes[k].member == MEMBER_LEARNER) {
			if (why)
				snprintf(why, whylen, "node %d is a learner catching up (a change in "
						      "progress)", k);
			return 1;
		}
		if (config_is_voter(c, k) && config_is_member(c, r)) {
			if (why)
				snprintf(why, whylen, "node %d replaces node %d, which is still a "
						      "member (a change in progress)", k, r);
			return 1;
		}
	}
	return 0;
}

int members_seed(const struct apus_config *cfg, int to, const char *text, size_t len,
		 uint64_t idx)
{
	struct apus_config *c = malloc(sizeof(*c));
	char why[256], path[PATH_MAX], *mine = NULL;
	int rc = -ENOMEM, n;

	if (!c)
		return rc;
	*c = *cfg;
	if (text && config_parse_members(c, text, len, why, sizeof(why)) == 0 &&
	    config_is_member(c, to)) {
		rc = members_file_write(cfg, to, text, len, idx);
		goto out;
	}
	/* Older than TO: the peer was held before it executed TO's entry.
	 * The newest membership of this host's nodes names it. */
	*c = *cfg;
	idx = (uint64_t)members_follow(c, NULL, 0);
	mine = malloc(MEMBERS_TEXT_MAX);
	if (!mine)
		goto out;
	if (idx && config_is_member(c, to) &&
	    (n = config_format_members(c, mine, MEMBERS_TEXT_MAX)) >= 0) {
		rc = members_file_write(cfg, to, mine, (size_t)n, idx);
	} else if (config_is_member(cfg, to)) {
		/* No change agreed yet, or none this host knows of: the config's. */
		rc = config_node_path(cfg, to, MEMBERS_FILE, path, sizeof(path)) ? -ENAMETOOLONG
		     : unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	} else {
		rc = -ENOENT;
	}
out:
	free(mine);
	free(c);
	return rc;
}

int members_copy(const struct apus_config *cfg, int from, int to)
{
	char *text = malloc(MEMBERS_TEXT_MAX);
	size_t len;
	uint64_t idx;
	int rc;

	if (!text)
		return -ENOMEM;
	if (members_file_read(cfg, from, text, MEMBERS_TEXT_MAX, &len, &idx) == 0) {
		const char *body = memchr(text, '\n', len);
		body = body ? body + 1 : text + len;
		rc = members_seed(cfg, to, body, len - (size_t)(body - text), idx);
	} else {
		rc = members_seed(cfg, to, NULL, 0, 0);
	}
	free(text);
	return rc;
}

int members_aborts(const struct apus_config *now, const struct apus_config *want)
{
	for (int k = 0; k < now->nnodes && k < want->nnodes; k++)
		if (now->nodes[k].member == MEMBER_LEARNER && want->nodes[k].member == MEMBER_REMOVED)
			return 1;
	return 0;
}

int members_config_load(const char *path, int self, struct apus_config *cfg, char *note,
			size_t notelen, char *err, size_t errlen)
{
	note[0] = '\0';
	if (config_load(path, cfg, err, errlen))
		return -1;
	if (self < cfg->nnodes)
		return 0;
	int idx = members_follow(cfg, note, notelen);
	if (self >= cfg->nnodes) {
		snprintf(err, errlen, "%s: node %d is not in the config (it has %d), nor in a "
				      "membership agreed since that a node of this host keeps",
			 cfg->path, self, cfg->nnodes);
		return -1;
	}
	(void)idx;
	return 0;
}

int members_follow(struct apus_config *cfg, char *note, size_t notelen)
{
	char *text = malloc(MEMBERS_TEXT_MAX), why[256];
	uint64_t best = 0, idx;
	size_t len;
	int from = -1;

	if (note && notelen)
		note[0] = '\0';
	if (!text)
		return -1;
	for (int i = 0; i < cfg->nnodes; i++)
		if (members_file_read(cfg, i, text, MEMBERS_TEXT_MAX, &len, &idx) == 0 && idx > best)
			best = idx, from = i;
	if (from >= 0 && !members_file_read(cfg, from, text, MEMBERS_TEXT_MAX, &len, &idx) &&
	    config_parse_members(cfg, text, len, why, sizeof(why)) == 0 && note)
		snprintf(note, notelen, "node %d's %s (entry %llu)", from, MEMBERS_FILE,
			 (unsigned long long)idx);
	free(text);
	return from >= 0 ? (int)best : 0;
}
