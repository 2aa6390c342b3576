#include "coordinator/storage/sessions.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hex.h"
#include "common/logger.h"
#include "common/sys.h"

#define POINT_PREFIX "apus.sessions."

struct session {
	struct viewstamp vs;
	size_t len;
	char *prelude;
};

struct sessions {
	struct session *v;	/* sorted by connection */
	size_t n;
};

static int point_file(const struct apus_config *cfg, int node, uint64_t index, char *out)
{
	char name[64];

	snprintf(name, sizeof(name), POINT_PREFIX "%" PRIu64, index);
	return config_node_path(cfg, node, name, out, PATH_MAX) ? -ENAMETOOLONG : 0;
}

/* Whether HEX (to its end or a newline) is whole bytes of hex digits. */
static int is_hex(const char *hex, size_t *len)
{
	size_t i;

	for (i = 0; hex[i] && hex[i] != '\n'; i++)
		if (hex_digit(hex[i]) < 0)
			return 0;
	*len = i / 2;
	return i && !(i % 2);
}

int sessions_keep(const struct apus_config *cfg, int node, uint64_t index,
		  int (*fd_conn)(int fd, struct viewstamp *vs))
{
	char from[PATH_MAX], to[PATH_MAX], tmp[PATH_MAX + 8], *line = NULL;
	size_t cap = 0, len;
	int kept = 0, rc = 0;
	FILE *in, *out;

	if (config_node_path(cfg, node, SESSIONS_NEW, from, sizeof(from)) ||
	    point_file(cfg, node, index, to))
		return -ENAMETOOLONG;
	if (!(in = sys.fopen(from, "re")))
		return errno == ENOENT ? (unlink(to), 0) : -errno;
	snprintf(tmp, sizeof(tmp), "%s.tmp", to);
	if (!(out = sys.fopen(tmp, "we"))) {
		rc = -errno;
		fclose(in);
		return rc;
	}
	while (getline(&line, &cap, in) > 0) {
		struct viewstamp vs;
		char *hex;
		long fd = strtol(line, &hex, 10);

		if (hex == line || *hex != ' ' || !is_hex(hex + 1, &len) || fd < 0 || fd > INT_MAX) {
			pr_warn("snapshot_cmd's session line '%.*s' is not '<fd> <hex>': ignored",
				(int)strcspn(line, "\n") > 60 ? 60 : (int)strcspn(line, "\n"), line);
			continue;
		}
		if (!fd_conn || !fd_conn((int)fd, &vs)) {
			pr_warn("snapshot_cmd named fd %ld for a session: no client connection had it "
				"at the fork; ignored", fd);
			continue;
		}
		fprintf(out, "%" PRIu64 " %" PRIu64 " %s", vs.view, vs.idx, hex + 1);
		if (!strchr(hex, '\n'))
			fputc('\n', out);
		kept++;
	}
	free(line);
	fclose(in);
	if (fflush(out) || fsync(fileno(out)))
		rc = -errno;
	if (fclose(out) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, to) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	unlink(from);
	return rc ? rc : kept;
}

void sessions_prune(const struct apus_config *cfg, int node, uint64_t index)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *d;
	DIR *dp;

	if (config_node_path(cfg, node, ".", dir, sizeof(dir)) || !(dp = opendir(dir)))
		return;
	while ((d = readdir(dp))) {
		char *end;

		if (strncmp(d->d_name, POINT_PREFIX, strlen(POINT_PREFIX)))
			continue;
		errno = 0;
		uint64_t at = strtoull(d->d_name + strlen(POINT_PREFIX), &end, 10);
		if (end == d->d_name + strlen(POINT_PREFIX) || errno || (*end && strcmp(end, ".tmp")) ||
		    (at == index && !*end))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, d->d_name) < (int)sizeof(path))
			unlink(path);
	}
	closedir(dp);
}

static int by_conn(const void *a, const void *b)
{
	const struct viewstamp *x = &((const struct session *)a)->vs;
	const struct viewstamp *y = &((const struct session *)b)->vs;

	if (x->view != y->view)
		return x->view < y->view ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

struct sessions *sessions_load(const struct apus_config *cfg, int node, uint64_t index)
{
	struct sessions *s = calloc(1, sizeof(*s));
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0, room = 0;
	FILE *in;

	if (!s || point_file(cfg, node, index, path) || !(in = sys.fopen(path, "re")))
		return s;
	while (getline(&line, &cap, in) > 0) {
		struct session e;
		char *p = line, *hex;
		size_t len;

		e.vs.view = strtoull(p, &p, 10);
		e.vs.idx = strtoull(p, &hex, 10);
		if (*hex != ' ' || !is_hex(hex + 1, &len) || !(e.prelude = malloc(len)))
			continue;
		for (size_t i = 0; i < len; i++)
			e.prelude[i] = (char)(hex_digit(hex[1 + 2 * i]) << 4 | hex_digit(hex[2 + 2 * i]));
		e.len = len;
		if (s->n == room) {
			struct session *v = realloc(s->v, (room = room ? 2 * room : 16) * sizeof(*v));
			if (!v) {
				free(e.prelude);
				break;
			}
			s->v = v;
		}
		s->v[s->n++] = e;
	}
	free(line);
	fclose(in);
	qsort(s->v, s->n, sizeof(*s->v), by_conn);
	if (s->n)
		pr_info("recovery point at entry %" PRIu64 ": %zu client session%s to carry", index,
			s->n, s->n == 1 ? "" : "s");
	return s;
}

const char *sessions_prelude(const struct sessions *s, struct viewstamp vs, size_t *len)
{
	struct session key = { .vs = vs }, *e;

	if (!s || !s->n || !(e = bsearch(&key, s->v, s->n, sizeof(*s->v), by_conn)))
		return NULL;
	*len = e->len;
	return e->prelude;
}

void sessions_free(struct sessions *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].prelude);
	free(s->v);
	free(s);
}
