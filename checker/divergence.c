#include "divergence.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

int divergence_append(const char *path, const struct divergence *d)
{
	char excerpt[512], line[1024];
	int fd, n, rc = 0;

	json_escape(excerpt, sizeof(excerpt), d->excerpt, d->excerpt_len);
	n = snprintf(line, sizeof(line),
		     "{\"time_ms\":%llu,\"node\":%d,\"conn\":\"%llu.%llu\",\"offset\":%llu,"
		     "\"leader_crc\":\"%016llx\",\"replica_crc\":\"%016llx\",\"index\":%llu,"
		     "\"why\":\"%s\",\"replica_excerpt\":\"%s\"}\n",
		     (unsigned long long)d->time_ms, d->node, (unsigned long long)d->conn_view,
		     (unsigned long long)d->conn_idx, (unsigned long long)d->offset,
		     (unsigned long long)d->leader_crc, (unsigned long long)d->replica_crc,
		     (unsigned long long)d->index, d->why, excerpt);
	if (n < 0 || (size_t)n >= sizeof(line))
		return -EOVERFLOW;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, line, (size_t)n) != n)
		rc = -EIO;
	close(fd);
	return rc;
}
