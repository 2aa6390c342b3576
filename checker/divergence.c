#include "checker/divergence.h"
#include "common/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void json_escape(char *out, size_t outlen, const void *s, size_t len)
{
	const unsigned char *p = s;
	size_t o = 0;

	for (size_t i = 0; i < len && o + 7 < outlen; i++) {
		unsigned char ch = p[i];
		if (ch == '"' || ch == '\\')
			o += (size_t)snprintf(out + o, outlen - o, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			o += (size_t)snprintf(out + o, outlen - o, "\\u%04x", ch);
		else
			out[o++] = (char)ch;
	}
	out[o] = '\0';
}

int divergence_format(char *line, size_t len, const struct divergence *d)
{
	char excerpt[512];
	int n;

	json_escape(excerpt, sizeof(excerpt), d->excerpt, d->excerpt_len);
	n = snprintf(line, len,
		     "{\"time_ms\":%llu,\"node\":%d,\"conn\":\"%llu.%llu\",\"offset\":%llu,"
		     "\"leader_crc\":\"%016llx\",\"replica_crc\":\"%016llx\",\"index\":%llu,"
		     "\"why\":\"%s\",\"replica_excerpt\":\"%s\"}\n",
		     (unsigned long long)d->time_ms, d->node, (unsigned long long)d->conn_view,
		     (unsigned long long)d->conn_idx, (unsigned long long)d->offset,
		     (unsigned long long)d->leader_crc, (unsigned long long)d->replica_crc,
		     (unsigned long long)d->index, d->why, excerpt);
	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

int divergence_append(const char *path, const struct divergence *d)
{
	char line[1024];
	int fd, n, rc = 0;

	n = divergence_format(line, sizeof(line), d);
	if (n < 0)
		return n;
	fd = sys.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (sys.write(fd, line, (size_t)n) != n)
		rc = -EIO;
	sys.close(fd);
	return rc;
}

unsigned long long divergence_field_u64(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(line, pat);
	return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

void divergence_field_str(const char *line, const char *key, char *out, size_t len)
{
	char pat[64];
	const char *p, *e;

	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	out[0] = '\0';
	p = strstr(line, pat);
	if (!p)
		return;
	p += strlen(pat);
	/* Skip escapes as pairs: an excerpt ending in a backslash is written
	 * \\ before the closing quote, which is no escaped quote. */
	for (e = p; *e && *e != '"'; e++)
		if (*e == '\\' && e[1])
			e++;
	snprintf(out, len, "%.*s", (int)(e - p), p);
}
