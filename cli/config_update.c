/* Writes the agreed membership into a config file, keeping everything
 * else of it (comments, order, global keys); see config_update.h. */
#include "config_update.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The key of a "key = value" line, into KEY (empty if none). */
static void line_key(const char *line, char *key, size_t cap)
{
	const char *s = line, *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s;
	while (*e && *e != '=' && *e != ' ' && *e != '\t' && *e != '\n' && *e != '#')
		e++;
	const char *q = e;
	while (*q == ' ' || *q == '\t')
		q++;
	if (*q != '=' || e == s || (size_t)(e - s) >= cap) {
		key[0] = '\0';
		return;
	}
	memcpy(key, s, (size_t)(e - s));
	key[e - s] = '\0';
}

/* The lines a section of node I gets from us: its member line, and its
 * replaces line when it has one (voters without one need no line). */
static void our_lines(const struct node_conf *n, FILE *out)
{
	if (n->member != MEMBER_VOTER)
		fprintf(out, "member = %s\n", member_role_name(n->member));
	if (n->replaces >= 0)
		fprintf(out, "replaces = %d\n", n->replaces);
}

int config_update_members(const struct apus_config *cfg, const char *path, char *err,
			  size_t errlen)
{
	char tmp[PATH_MAX + 16], line[8192], key[64];
	int seen[APUS_MAX_NODES] = { 0 }, cur = -1, rc = -1;
	struct stat st;
	FILE *in = fopen(path, "re"), *out = NULL;

	if (!in) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s.apus-tmp", path);
	out = fopen(tmp, "we");
	if (!out) {
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (fstat(fileno(in), &st) == 0)
		fchmod(fileno(out), st.st_mode & 07777);
	while (fgets(line, sizeof(line), in)) {
		const char *s = line;
		int id;
		char extra;

		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '[' && sscanf(s, "[node %d%c", &id, &extra) == 2 && extra == ']' &&
		    id >= 0 && id < APUS_MAX_NODES) {
			cur = id;
			fputs(line, out);
			if (id < cfg->nnodes) {
				seen[id] = 1;
				our_lines(&cfg->nodes[id], out);
			}
			continue;
		}
		if (*s == '[')
			cur = -1;
		line_key(line, key, sizeof(key));
		/* Ours, written after the section's header above. */
		if (cur >= 0 && cur < cfg->nnodes &&
		    (!strcmp(key, "member") || !strcmp(key, "replaces")))
			continue;
		fputs(line, out);
	}
	for (int i = 0; i < cfg->nnodes; i++) {
		const struct node_conf *n = &cfg->nodes[i];
		time_t now = time(NULL);
		char when[64];

		if (seen[i])
			continue;
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
		fprintf(out, "\n# added by apus on %s (the cluster agreed it)\n[node %d]\n", when, i);
		our_lines(n, out);
		fprintf(out, "address = %s\napp_port = %d\ndata_dir = %s\n", n->address, n->app_port,
			n->data_dir);
		if (strcmp(n->run_dir, n->data_dir))
			fprintf(out, "run_dir = %s\n", n->run_dir);
		if (strcmp(n->secret_file, cfg->secret_file))
			fprintf(out, "secret_file = %s\n", n->secret_file);
		if (n->peer_port)
			fprintf(out, "peer_port = %d\n", n->peer_port);
		if (n->guard_port)
			fprintf(out, "guard_port = %d\n", n->guard_port);
		if (n->metrics_port)
			fprintf(out, "metrics_port = %d\n", n->metrics_port);
		if (n->netns[0])
			fprintf(out, "netns = %s\n", n->netns);
	}
	if (fflush(out) || fsync(fileno(out))) {
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "cannot replace %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (out)
		fclose(out);
	if (rc)
		unlink(tmp);
	fclose(in);
	return rc;
}
